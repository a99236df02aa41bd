//! Registered names.

use runtime::{
    Down, Node, RegistryError, receive, register, registered, self_pid, send, spawn, spawn_monitor,
    unregister, whereis,
};

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

#[test]
fn register_whereis_unregister_registered() {
    let node = node();
    let out = node
        .run(async {
            let me = self_pid();
            register("me", me).unwrap();
            let other = spawn(async {
                let () = receive().await;
            })
            .unwrap();
            register("other", other).unwrap();
            let found = (whereis("me"), whereis("other"), whereis("nobody"));
            let names = registered();
            unregister("other").unwrap();
            let after = (whereis("other"), registered());
            // The process may take a name again once unregistered.
            register("other2", other).unwrap();
            send(other, ());
            (found, names, after, me, other)
        })
        .unwrap();
    let (found, names, after, me, other) = out;
    assert_eq!(found, (Some(me), Some(other), None));
    assert_eq!(
        names.iter().map(|n| &**n).collect::<Vec<_>>(),
        ["me", "other"]
    );
    assert_eq!(after.0, None);
    assert_eq!(after.1.iter().map(|n| &**n).collect::<Vec<_>>(), ["me"]);
}

#[test]
fn a_name_dies_with_its_process() {
    let node = node();
    let gone = node
        .run(async {
            let (p, _) = spawn_monitor(async {
                register("short-lived", self_pid()).unwrap();
                let () = receive().await;
            })
            .unwrap();
            while whereis("short-lived").is_none() {
                tokio::task::yield_now().await;
            }
            send(p, ());
            let _: Down = receive().await;
            (whereis("short-lived"), registered().is_empty())
        })
        .unwrap();
    assert_eq!(gone, (None, true));
    // The node's view agrees.
    assert_eq!(node.whereis("short-lived"), None);
}

#[test]
fn registry_errors_name_their_input() {
    let node = node();
    let errs = node
        .run(async {
            let me = self_pid();
            register("taken", me).unwrap();
            let other = spawn(async {
                let () = receive().await;
            })
            .unwrap();
            let taken = register("taken", other).unwrap_err();
            let named = register("second", me).unwrap_err();
            let (dead, _) = spawn_monitor(async {}).unwrap();
            let _: Down = receive().await;
            let noproc = register("dead", dead).unwrap_err();
            let not_registered = unregister("never").unwrap_err();
            let empty = register("", other).unwrap_err();
            send(other, ());
            (taken, named, noproc, not_registered, empty, me, dead)
        })
        .unwrap();
    let (taken, named, noproc, not_registered, empty, me, dead) = errs;
    assert_eq!(
        taken,
        RegistryError::NameTaken {
            name: "taken".into(),
            holder: me
        }
    );
    assert_eq!(
        named,
        RegistryError::AlreadyNamed {
            pid: me,
            name: "taken".into()
        }
    );
    assert_eq!(noproc, RegistryError::NoProc(dead));
    assert_eq!(not_registered, RegistryError::NotRegistered("never".into()));
    assert_eq!(empty, RegistryError::EmptyName);
    assert!(taken.to_string().contains("`taken`"));
    assert!(noproc.to_string().contains(&dead.to_string()));
    // Outside a process the free functions have no node.
    assert_eq!(register("x", me), Err(RegistryError::NotInProcess));
    assert_eq!(whereis("taken"), None);
}

#[test]
fn names_are_per_node() {
    let a = node();
    let b = node();
    let pa = a
        .spawn(async {
            let () = receive().await;
        })
        .unwrap();
    a.register("server", pa).unwrap();
    assert_eq!(a.whereis("server"), Some(pa));
    assert_eq!(b.whereis("server"), None);
    let pb = b
        .spawn(async {
            let () = receive().await;
        })
        .unwrap();
    b.register("server", pb).unwrap();
    assert_ne!(a.whereis("server"), b.whereis("server"));
    assert_eq!(a.registered().len(), 1);
}
