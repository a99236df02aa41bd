//! Sending and receiving: order, selectivity, timeouts, and nothing lost when a receive is
//! dropped mid-scan.

use std::time::Duration;

use runtime::{
    Message, Node, SendError, receive, receive_any, receive_any_timeout, receive_timeout,
    receive_where, self_pid, send, send_named, spawn,
};

const LONG: Duration = Duration::from_secs(30);

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

#[test]
fn messages_from_one_sender_arrive_in_order() {
    let node = node();
    let got = node
        .run(async {
            let me = self_pid();
            spawn(async move {
                for i in 0..1000u32 {
                    send(me, i);
                }
            })
            .unwrap();
            let mut got = Vec::new();
            for _ in 0..1000 {
                got.push(receive::<u32>().await);
            }
            got
        })
        .unwrap();
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
}

#[test]
fn concurrent_senders_each_keep_their_order_and_nothing_is_lost() {
    let node = node();
    let per_sender = node
        .run(async {
            let me = self_pid();
            for s in 0..4u32 {
                spawn(async move {
                    for i in 0..5000u32 {
                        send(me, (s, i));
                    }
                })
                .unwrap();
            }
            let mut next = [0u32; 4];
            for _ in 0..20_000 {
                let (s, i): (u32, u32) = receive().await;
                assert_eq!(i, next[s as usize], "sender {s} out of order");
                next[s as usize] += 1;
            }
            next
        })
        .unwrap();
    assert_eq!(per_sender, [5000; 4]);
}

#[test]
fn selective_receive_takes_the_first_match_and_keeps_the_rest_in_order() {
    let node = node();
    let (picked, rest) = node
        .run(async {
            let me = self_pid();
            for i in 0..10u32 {
                send(me, i);
            }
            send(me, "text");
            let picked = receive_where(|n: &u32| *n % 4 == 3).await;
            let text: &str = receive().await;
            assert_eq!(text, "text");
            let mut rest = Vec::new();
            while let Some(n) = receive_timeout::<u32>(Duration::ZERO).await {
                rest.push(n);
            }
            (picked, rest)
        })
        .unwrap();
    assert_eq!(picked, 3);
    assert_eq!(rest, vec![0, 1, 2, 4, 5, 6, 7, 8, 9]);
}

#[test]
fn receive_timeout_gives_none_then_sees_later_messages() {
    let node = node();
    let out = node
        .run(async {
            let first = receive_timeout::<u8>(Duration::from_millis(20)).await;
            let first_any = receive_any_timeout(Duration::from_millis(1))
                .await
                .is_some();
            let me = self_pid();
            spawn(async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                send(me, 7u8);
            })
            .unwrap();
            let second = receive_timeout::<u8>(LONG).await;
            (first, first_any, second)
        })
        .unwrap();
    assert_eq!(out, (None, false, Some(7)));
}

#[test]
fn a_receive_dropped_mid_scan_loses_and_reorders_nothing() {
    let node = node();
    let order = node
        .run(async {
            let me = self_pid();
            for i in 0..100u32 {
                send(me, i);
            }
            // A receive that scans everything, matches nothing, and is dropped by select!.
            tokio::select! {
                n = receive_where(|n: &u32| *n >= 1000) => panic!("matched {n}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            // Another dropped by a timeout while new messages keep arriving.
            spawn(async move {
                for i in 100..200u32 {
                    send(me, i);
                    tokio::task::yield_now().await;
                }
            })
            .unwrap();
            let _ = tokio::time::timeout(
                Duration::from_millis(30),
                receive_where(|n: &u32| *n >= 1000),
            )
            .await;
            let mut order = Vec::new();
            while order.len() < 200 {
                order.push(receive::<u32>().await);
            }
            order
        })
        .unwrap();
    assert_eq!(order, (0..200).collect::<Vec<_>>());
}

#[test]
fn two_receives_in_one_select_do_not_skip_messages() {
    let node = node();
    let got = node
        .run(async {
            let me = self_pid();
            for i in 0..50u32 {
                send(me, i);
                send(me, i as u64);
            }
            let mut u32s = Vec::new();
            let mut u64s = Vec::new();
            while u32s.len() < 50 || u64s.len() < 50 {
                tokio::select! {
                    a = receive::<u32>() => u32s.push(a),
                    b = receive::<u64>() => u64s.push(b),
                }
            }
            (u32s, u64s)
        })
        .unwrap();
    assert_eq!(got.0, (0..50).collect::<Vec<u32>>());
    assert_eq!(got.1, (0..50).collect::<Vec<u64>>());
}

#[test]
fn sending_to_a_dead_pid_is_silently_dropped() {
    let node = node();
    let dead = node.spawn(async {}).unwrap();
    let ok = node
        .run(async move {
            let (pid, _) = runtime::spawn_monitor(async {}).unwrap();
            let _: runtime::Down = receive().await;
            send(pid, 1u8);
            send(dead, 2u8);
            true
        })
        .unwrap();
    assert!(ok);
}

#[test]
fn sending_to_an_unregistered_name_is_an_error_that_gives_the_message_back() {
    let node = node();
    let err = node
        .run(async { send_named("nobody", String::from("hello")).unwrap_err() })
        .unwrap();
    assert!(matches!(&err, SendError::NotRegistered { name, .. } if &**name == "nobody"));
    assert!(err.to_string().contains("nobody"));
    assert_eq!(err.into_inner(), "hello");
    let outside = node.send_named("nobody", 5u8).unwrap_err();
    assert_eq!(outside.into_inner(), 5);
    let no_process = send_named("x", 1u8).unwrap_err();
    assert!(matches!(no_process, SendError::NotInProcess { .. }));
}

#[test]
fn send_works_from_outside_any_process() {
    let node = node();
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = node
        .spawn(async move {
            let n: u32 = receive().await;
            tx.send(n).unwrap();
        })
        .unwrap();
    send(pid, 99u32);
    assert_eq!(rx.recv_timeout(LONG).unwrap(), 99);
}

#[test]
fn receive_any_hands_out_untyped_messages() {
    let node = node();
    let kinds = node
        .run(async {
            let me = self_pid();
            send(me, 1u8);
            send(me, "two");
            let a: Message = receive_any().await;
            let b: Message = receive_any().await;
            (a.is::<u8>(), b.downcast::<&str>().ok())
        })
        .unwrap();
    assert_eq!(kinds, (true, Some("two")));
}

#[test]
fn receiving_outside_a_process_panics_with_a_clear_message() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(async { tokio::spawn(async { receive_any().await }).await })
        .unwrap_err();
    let payload = err.into_panic();
    let msg = payload.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(msg.contains("outside a process"), "{msg}");
}

/// A waker that counts its wakes.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn two_receives_polled_with_different_wakers_both_get_woken() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};

    let node = node();
    let woken = node
        .run(async {
            // As FuturesUnordered does: each receive polled under a waker of its own.
            let wa = Arc::new(CountingWaker(Default::default()));
            let wb = Arc::new(CountingWaker(Default::default()));
            let (waker_a, waker_b) = (Waker::from(Arc::clone(&wa)), Waker::from(Arc::clone(&wb)));
            let mut a = std::pin::pin!(receive::<u8>());
            let mut b = std::pin::pin!(receive::<u16>());
            assert!(
                a.as_mut()
                    .poll(&mut Context::from_waker(&waker_a))
                    .is_pending()
            );
            assert!(
                b.as_mut()
                    .poll(&mut Context::from_waker(&waker_b))
                    .is_pending()
            );
            // B's registration must not leave A without a wake-up.
            send(self_pid(), 1u8);
            let a_woken = wa.0.load(Ordering::SeqCst);
            let got = match a.as_mut().poll(&mut Context::from_waker(&waker_a)) {
                Poll::Ready(v) => Some(v),
                Poll::Pending => None,
            };
            (a_woken, got)
        })
        .unwrap();
    assert!(woken.0 >= 1, "the first receive was never woken");
    assert_eq!(woken.1, Some(1));
}

/// A receive of the process's own task that takes the last queued message leaves the next
/// push to wake the task, so that the next receive waits without the mailbox lock. A receive
/// polled under another waker after that must still register its own waker, and be woken.
#[test]
fn a_receive_under_another_waker_after_the_last_message_was_taken_is_woken() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::task::{Context, Poll, Waker};

    let node = node();
    let (woken, got) = node
        .run(async {
            // One suspension first, so that the process keeps its task's waker.
            tokio::task::yield_now().await;
            send(self_pid(), 1u8);
            assert_eq!(receive::<u8>().await, 1);
            let other = Arc::new(CountingWaker(Default::default()));
            let waker = Waker::from(Arc::clone(&other));
            let mut next = std::pin::pin!(receive::<u16>());
            assert!(
                next.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
            send(self_pid(), 2u16);
            let woken = other.0.load(Ordering::SeqCst);
            let got = match next.as_mut().poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(v) => Some(v),
                Poll::Pending => None,
            };
            (woken, got)
        })
        .unwrap();
    assert_eq!(woken, 1, "the receive under its own waker was not woken");
    assert_eq!(got, Some(2));
}

/// After taking its last message, a process awaiting something else is woken by the next
/// message (a wake for nothing) and goes on waiting; nothing is lost or reordered.
#[test]
fn a_process_woken_by_a_message_while_it_awaits_something_else_loses_nothing() {
    let node = node();
    let got = node
        .run(async {
            let me = self_pid();
            send(me, 0u32);
            let first: u32 = receive().await;
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            spawn(async move {
                for i in 1..=100u32 {
                    send(me, i);
                    tokio::task::yield_now().await;
                }
                let _ = tx.send(());
            })
            .unwrap();
            rx.await.expect("the sender finished");
            let mut got = vec![first];
            for _ in 0..100 {
                got.push(receive_timeout::<u32>(LONG).await.expect("a message"));
            }
            got
        })
        .unwrap();
    assert_eq!(got, (0..=100).collect::<Vec<u32>>());
}

/// One message at a time from another worker, each taken as it comes: every push that follows
/// a take of the last message wakes the receiver (none is lost to a wait without the lock).
#[test]
fn a_receive_loop_fed_one_message_at_a_time_from_another_worker_misses_none() {
    const N: u32 = 20_000;
    let node = node();
    let got = node
        .run(async {
            let me = self_pid();
            spawn(async move {
                for i in 0..N {
                    send(me, i);
                    if i % 3 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
            .unwrap();
            let mut next = 0;
            while next < N {
                match receive_timeout::<u32>(LONG).await {
                    Some(i) if i == next => next += 1,
                    other => return Err(format!("expected {next}, got {other:?}")),
                }
            }
            Ok(next)
        })
        .unwrap();
    assert_eq!(got, Ok(N));
}
