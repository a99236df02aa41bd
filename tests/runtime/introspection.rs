//! processes() and process_info().

use std::time::Duration;

use runtime::{
    Down, Node, ProcessStatus, SpawnOptions, monitor, process_info, processes, receive, self_pid,
    send, spawn, spawn_link, spawn_monitor, trap_exit,
};

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

async fn idle_worker() {
    let () = receive().await;
}

#[test]
fn process_info_reports_every_field() {
    let node = node();
    let out = node
        .run(async {
            let me = self_pid();
            trap_exit(true).unwrap();
            let child = runtime::spawn_opt(idle_worker(), SpawnOptions::new().name("child").link())
                .unwrap()
                .pid;
            let watched = spawn(idle_worker()).unwrap();
            monitor(watched).unwrap();
            // Three messages the child will not take yet.
            for i in 0..3u32 {
                send(child, i);
            }
            // Wait until the child is suspended in its receive.
            let info = loop {
                let info = process_info(child).unwrap();
                if info.status == ProcessStatus::Waiting || info.status == ProcessStatus::Runnable {
                    break info;
                }
                tokio::task::yield_now().await;
            };
            let mine = process_info(me).unwrap();
            let all = processes();
            send(child, ());
            send(watched, ());
            (info, mine, all, me, child, watched)
        })
        .unwrap();
    let (info, mine, all, me, child, watched) = out;
    assert_eq!(info.pid, child);
    assert_eq!(info.registered_name.as_deref(), Some("child"));
    assert_eq!(info.parent, Some(me));
    assert!(
        info.initial_call.contains("idle_worker"),
        "{}",
        info.initial_call
    );
    assert_eq!(info.message_queue_len, 3);
    assert_eq!(info.links, vec![me]);
    assert!(!info.trap_exit);
    assert_eq!(mine.status, ProcessStatus::Running);
    assert!(mine.trap_exit);
    assert_eq!(mine.links, vec![child]);
    assert_eq!(mine.monitors, vec![watched]);
    assert_eq!(mine.parent, None);
    for pid in [me, child, watched] {
        assert!(all.contains(&pid));
    }
}

#[test]
fn monitored_by_and_dead_pids() {
    let node = node();
    let (watched_by, after) = node
        .run(async {
            let (p, _) = spawn_monitor(idle_worker()).unwrap();
            let watched_by = process_info(p).unwrap().monitored_by;
            send(p, ());
            let _: Down = receive().await;
            (watched_by == vec![self_pid()], process_info(p))
        })
        .unwrap();
    assert!(watched_by);
    assert!(after.is_none());
}

#[test]
fn the_initial_call_can_be_named_and_processes_lists_the_node() {
    let node = node();
    let pid = node
        .spawn_opt(
            idle_worker(),
            SpawnOptions::new().initial_call("kv::server/1"),
        )
        .unwrap()
        .pid;
    let info = node.process_info(pid).unwrap();
    assert_eq!(info.initial_call, "kv::server/1");
    assert_eq!(info.parent, None);
    assert!(node.processes().contains(&pid));
    let linked = node
        .run(async move {
            let child = spawn_link(idle_worker()).unwrap();
            let l = process_info(child).unwrap().links;
            send(child, ());
            l == vec![self_pid()]
        })
        .unwrap();
    assert!(linked);
    send(pid, ());
    let start = std::time::Instant::now();
    while node.processes().contains(&pid) {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::yield_now();
    }
}

#[test]
fn heap_figures_without_the_counting_allocator_say_how_to_install_it() {
    // This test binary does not install `CountingAlloc`.
    assert!(!runtime::heap::installed());
    let node = node();
    let (info, err) = node
        .run(async {
            let me = self_pid();
            (
                process_info(me).unwrap(),
                runtime::heap::process_heap(me).unwrap_err(),
            )
        })
        .unwrap();
    assert_eq!(info.heap, None);
    assert_eq!(err, runtime::heap::HeapError::NotInstalled);
    assert!(err.to_string().contains("#[global_allocator]"), "{err}");
}

/// While a process ends (a kill drops its suspended future inside it), it reports `Exiting`.
#[test]
fn an_ending_process_reports_exiting() {
    struct ReportOnDrop(Option<tokio::sync::oneshot::Sender<Option<ProcessStatus>>>);
    impl Drop for ReportOnDrop {
        fn drop(&mut self) {
            let status = process_info(self_pid()).map(|info| info.status);
            if let Some(tx) = self.0.take() {
                let _ = tx.send(status);
            }
        }
    }
    let node = node();
    let status = node
        .run(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let guard = ReportOnDrop(Some(tx));
            let pid = spawn(async move {
                let _guard = guard;
                let () = receive().await;
            })
            .unwrap();
            runtime::exit(pid, runtime::ExitReason::Kill);
            rx.await.unwrap()
        })
        .unwrap();
    assert_eq!(status, Some(ProcessStatus::Exiting));
}

#[test]
fn a_walk_reads_every_process_its_ties_and_its_mailbox() {
    use runtime::introspect;
    use runtime::supervisor::{
        self, ChildSpec, StartOptions, Strategy, SupervisorFlags, SupervisorSpec,
    };

    let node = node();
    let spec = SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForOne))
        .child(ChildSpec::worker("w", idle_worker));
    let sup = node
        .block_on(supervisor::start_on(&node, spec, StartOptions::new()))
        .unwrap();
    let (holder, child) = node
        .run(async move {
            let child = supervisor::which_children(sup, Duration::from_secs(60))
                .await
                .unwrap()[0]
                .pid
                .unwrap();
            let holder = spawn(async move {
                runtime::link(child).unwrap();
                monitor(sup).unwrap();
                let () = receive().await;
            })
            .unwrap();
            (holder, child)
        })
        .unwrap();
    // Five boxed messages (32 bytes each) the holder will not take, and two inline ones.
    for _ in 0..5 {
        node.send(holder, [1u64; 4]);
    }
    node.send(holder, 1u8);
    node.send(holder, 2u8);
    let seen = |pid| {
        let mut found = None;
        // The visitor runs outside the process's lock: it may send to it, walk again.
        introspect::walk(&node, |p| {
            if p.pid == pid {
                node.send(pid, 0u16);
                introspect::walk(&node, |_| {});
                found = Some((
                    p.parent,
                    p.is_supervisor,
                    p.links.to_vec(),
                    p.monitors.to_vec(),
                    p.message_queue_len,
                    p.mailbox_bytes,
                    p.initial_call.to_owned(),
                ));
            }
        });
        found.unwrap()
    };
    // Wait for the holder's link and monitor, and for its mailbox to count exactly the seven
    // and the 0u16 each earlier walk's visitor sent (a walk reads the mailbox before its
    // visitor sends): while the holder's receive looks at a message it has just taken from
    // the queue (outside every lock), that message is in neither of the mailbox's queues,
    // and a walk then counts one less.
    let mut walks = 0;
    let mut holder_seen = seen(holder);
    for _ in 0..1000 {
        if !holder_seen.2.is_empty() && !holder_seen.3.is_empty() && holder_seen.4 == 7 + walks {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        walks += 1;
        holder_seen = seen(holder);
    }
    let (parent, is_sup, links, monitors, len, bytes, _) = holder_seen;
    // Spawned by `run`'s process, which has ended.
    assert!(parent.is_some_and(|p| p != sup) && !is_sup);
    assert_eq!((links, monitors), (vec![child], vec![sup]));
    assert_eq!(len, 7 + walks, "seven, and a 0u16 from each earlier walk");
    assert!(bytes >= 5 * 32, "{bytes}");
    let (parent, is_sup, links, _, _, _, call) = seen(sup);
    assert_eq!(
        (parent, is_sup, call.as_str()),
        (None, true, "runtime::supervisor::init/1")
    );
    assert!(links.contains(&child));
    let (parent, is_sup, ..) = seen(child);
    assert_eq!((parent, is_sup), (Some(sup), false));
    assert_eq!(introspect::walk(&node, |_| {}), 3);
}
