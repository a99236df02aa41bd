//! Spawning: parents, initial calls, links and monitors at spawn, options, helper tasks.

use std::time::Duration;

use runtime::{
    Down, ExitReason, Node, RegistryError, SpawnError, SpawnOptions, process_info, receive,
    self_pid, send, spawn, spawn_blocking, spawn_link, spawn_monitor, spawn_opt, spawn_task,
    try_self_pid, whereis,
};

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

async fn worker_loop() {
    let () = receive().await;
}

#[test]
fn a_process_records_its_parent_and_initial_call() {
    let node = node();
    let (info, me) = node
        .run(async {
            let child = spawn(worker_loop()).unwrap();
            let info = process_info(child).unwrap();
            send(child, ());
            (info, self_pid())
        })
        .unwrap();
    assert_eq!(info.parent, Some(me));
    assert!(
        info.initial_call.ends_with("worker_loop"),
        "{}",
        info.initial_call
    );
}

#[test]
fn spawn_link_and_spawn_monitor_are_set_up_before_the_child_runs() {
    let node = node();
    let out = node
        .run(async {
            // The child dies at once; the monitor must still see its real reason.
            let (pid, mref) = spawn_monitor(async { panic!("instant") }).unwrap();
            let down: Down = receive().await;
            // A linked child that dies at once must take down a non-trapping parent.
            let (parent, _) = spawn_monitor(async {
                spawn_link(async { runtime::exit_self(ExitReason::custom("linked")) }).unwrap();
                std::future::pending::<()>().await;
            })
            .unwrap();
            let parent_down: Down = runtime::receive_where(move |d: &Down| d.pid == parent).await;
            (pid, mref, down, parent_down.reason)
        })
        .unwrap();
    assert_eq!(
        out.2,
        Down {
            pid: out.0,
            reason: ExitReason::Panic("instant".into()),
            monitor_ref: out.1
        }
    );
    assert_eq!(out.3, ExitReason::custom("linked"));
}

#[test]
fn spawn_options_name_link_monitor_and_trap_exit() {
    let node = node();
    let out = node
        .run(async {
            let spawned = spawn_opt(
                worker_loop(),
                SpawnOptions::new().name("opt").link().monitor().trap_exit(),
            )
            .unwrap();
            let info = process_info(spawned.pid).unwrap();
            let named = whereis("opt");
            // A taken name: no process runs.
            let before = runtime::processes().len();
            let err = spawn_opt(worker_loop(), SpawnOptions::new().name("opt")).unwrap_err();
            let after = runtime::processes().len();
            runtime::unlink(spawned.pid).unwrap();
            send(spawned.pid, ());
            let down: Down = receive().await;
            (spawned, info, named, err, before, after, down)
        })
        .unwrap();
    let (spawned, info, named, err, before, after, down) = out;
    assert_eq!(named, Some(spawned.pid));
    assert!(info.trap_exit);
    assert_eq!(info.monitored_by.len(), 1);
    assert_eq!(info.links.len(), 1);
    assert!(matches!(
        err,
        SpawnError::Name(RegistryError::NameTaken { .. })
    ));
    assert_eq!(before, after);
    assert_eq!(Some(down.monitor_ref), spawned.monitor);
}

#[test]
fn free_spawn_functions_need_a_process() {
    assert_eq!(spawn(async {}).unwrap_err(), SpawnError::NotInProcess);
    assert_eq!(spawn_link(async {}).unwrap_err(), SpawnError::NotInProcess);
    assert!(spawn_task(async {}).is_err());
    assert!(spawn_blocking(|| ()).is_err());
    let node = node();
    // From outside, link and monitor have no process to attach to.
    let err = node
        .spawn_opt(async {}, SpawnOptions::new().link())
        .unwrap_err();
    assert_eq!(err, SpawnError::NotInProcess);
    assert!(err.to_string().contains("outside a process"));
}

#[test]
fn helper_tasks_act_for_their_process_but_cannot_receive() {
    let node = node();
    let out = node
        .run(async {
            let me = self_pid();
            let in_task = spawn_task(async { try_self_pid() }).unwrap().await.unwrap();
            let in_blocking = spawn_blocking(try_self_pid).unwrap().await.unwrap();
            // A helper can spawn: the new process's parent is the helper's owner.
            let child = spawn_task(async { spawn(worker_loop()).unwrap() })
                .unwrap()
                .await
                .unwrap();
            let parent = process_info(child).unwrap().parent;
            send(child, ());
            let receive_in_helper = spawn_task(async { runtime::receive_any().await })
                .unwrap()
                .await;
            (
                me,
                in_task,
                in_blocking,
                parent,
                receive_in_helper.unwrap_err().is_panic(),
            )
        })
        .unwrap();
    assert_eq!(out.1, Some(out.0));
    assert_eq!(out.2, Some(out.0));
    assert_eq!(out.3, Some(out.0));
    assert!(out.4);
}

#[test]
fn a_stale_pid_never_reaches_the_process_now_in_its_slot() {
    let node = node();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = node
        .run(async move {
            let (old, _) = spawn_monitor(async {}).unwrap();
            let _: Down = receive().await;
            // Spawn until the slot is reused.
            let mut newer = None;
            for _ in 0..1000 {
                let tx = tx.clone();
                let p = spawn(async move {
                    let n: u32 = receive().await;
                    tx.send(n).unwrap();
                })
                .unwrap();
                if p.index() == old.index() {
                    newer = Some(p);
                    break;
                }
            }
            let newer = newer.expect("the freed slot is reused");
            send(old, 1u32);
            send(newer, 2u32);
            (old, newer)
        })
        .unwrap();
    assert_ne!(out.0.serial(), out.1.serial());
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)).unwrap(), 2);
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
}
