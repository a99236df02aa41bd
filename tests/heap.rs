//! Per-process heaps with the counting allocator installed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use proptest::prelude::*;
use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions, Timeout};
use runtime::heap::{self, HeapStats};
use runtime::{
    Down, ExitReason, Node, Pid, SpawnOptions, receive, self_pid, send, spawn, spawn_blocking,
    spawn_monitor, spawn_opt,
};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

fn me() -> HeapStats {
    heap::process_heap(self_pid()).unwrap()
}

fn node() -> Node {
    Node::builder().worker_threads(2).build().unwrap()
}

#[test]
fn the_allocator_is_detected() {
    assert!(heap::installed());
    heap::require_installed().unwrap();
    let node = node();
    let info = node
        .run(async { runtime::process_info(self_pid()).unwrap() })
        .unwrap();
    assert!(info.heap.is_some());
}

/// A counter whose state and handler allocate nothing.
struct Counter(u64);

impl GenServer for Counter {
    type Args = ();
    type Call = u64;
    type Reply = u64;
    type Cast = ();

    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Counter(0))
    }

    async fn handle_call(&mut self, n: u64, _from: &mut Caller<u64>) -> CallReply<u64> {
        self.0 += n;
        CallReply::Reply(self.0)
    }
}

/// Once warm, a call allocates nothing on either side: the server's handler future lives in
/// its own task (no box per message), the request travels inline in the message, the reply
/// goes through the caller's reused slot and the deadline re-arms the caller's timer entry.
#[test]
fn a_call_allocates_nothing_on_either_side() {
    let node = Node::builder().current_thread().build().unwrap();
    let (client, server) = node
        .run(async {
            let server = gen_server::start::<Counter>((), StartOptions::new())
                .await
                .unwrap();
            let timeout = Timeout::After(Duration::from_secs(30));
            for n in 0..10 {
                server.call(n, timeout).await.unwrap();
            }
            let before = (me(), heap::process_heap(server.pid()).unwrap());
            for n in 0..200 {
                server.call(n, timeout).await.unwrap();
            }
            let total = server.call(0, Timeout::Infinity).await.unwrap();
            assert_eq!(total, (0..10).sum::<u64>() + (0..200).sum::<u64>());
            let after = (me(), heap::process_heap(server.pid()).unwrap());
            (
                (before.0.blocks, after.0.blocks),
                (before.1.blocks, after.1.blocks),
            )
        })
        .unwrap();
    assert_eq!(client.1 - client.0, 0, "the caller allocated per call");
    assert_eq!(server.1 - server.0, 0, "the server allocated per call");
}

#[test]
fn an_allocation_is_charged_exactly_to_its_process() {
    let node = node();
    let (before, during, after) = node
        .run(async {
            let before = me();
            let v: Vec<u8> = Vec::with_capacity(1001);
            let during = me();
            drop(std::hint::black_box(v));
            (before, during, me())
        })
        .unwrap();
    assert_eq!(during.bytes - before.bytes, 1001);
    assert_eq!(
        during.words - before.words,
        126,
        "1001 bytes round up to 126 words"
    );
    assert_eq!(during.blocks - before.blocks, 1);
    assert_eq!(during.live_bytes - before.live_bytes, 1001);
    assert_eq!(after.live_bytes, before.live_bytes);
    assert!(after.peak_live_bytes >= during.live_bytes);
    assert_eq!(after.bytes, during.bytes, "a free allocates nothing");
}

#[test]
fn growing_a_vec_counts_each_reallocation() {
    let node = node();
    let (before, after) = node
        .run(async {
            let before = me();
            let mut v: Vec<u64> = Vec::with_capacity(4);
            v.extend(0..4u64);
            v.reserve_exact(4); // 32 -> 64 bytes
            let after = me();
            drop(std::hint::black_box(v));
            (before, after)
        })
        .unwrap();
    assert_eq!(after.blocks - before.blocks, 2);
    assert_eq!(after.bytes - before.bytes, 32 + 64);
    assert_eq!(after.live_bytes - before.live_bytes, 64);
}

#[repr(align(128))]
struct Aligned([u8; 200]);

#[test]
fn over_aligned_blocks_keep_their_alignment_and_are_counted() {
    let node = node();
    let (before, after, aligned, capacity) = node
        .run(async {
            let mut blocks: Vec<Box<Aligned>> = Vec::with_capacity(10);
            let before = me();
            for i in 0..10u8 {
                blocks.push(Box::new(Aligned([i; 200])));
            }
            let aligned = blocks.iter().enumerate().all(|(i, b)| {
                (&**b as *const Aligned as usize).is_multiple_of(128) && b.0[199] == i as u8
            });
            let after = me();
            let capacity = blocks.capacity();
            drop(std::hint::black_box(blocks));
            (before, after, aligned, capacity)
        })
        .unwrap();
    assert!(aligned);
    assert_eq!(capacity, 10);
    let size = std::mem::size_of::<Aligned>() as u64;
    assert_eq!(size, 256);
    assert_eq!(after.blocks - before.blocks, 10);
    assert_eq!(after.bytes - before.bytes, 10 * size);
    assert_eq!(after.live_bytes - before.live_bytes, 10 * size);
}

#[test]
fn over_aligned_vecs_grow_and_shrink_through_realloc() {
    let node = node();
    let ok = node
        .run(async {
            let start = me();
            let mut v: Vec<Aligned> = Vec::new();
            for i in 0..50u8 {
                v.push(Aligned([i; 200]));
            }
            v.truncate(3);
            v.shrink_to_fit();
            let ok = v.iter().enumerate().all(|(i, a)| a.0[0] == i as u8)
                && (v.as_ptr() as usize).is_multiple_of(128);
            let live = me().live_bytes - start.live_bytes;
            drop(v);
            (ok, live, me().live_bytes - start.live_bytes)
        })
        .unwrap();
    assert!(ok.0);
    assert_eq!(ok.1, 3 * 256);
    assert_eq!(ok.2, 0);
}

/// 16-aligned, as `u128` is: its tag is in a 16-byte header.
#[repr(align(16))]
#[derive(Clone, Copy)]
struct Sixteen([u8; 48]);

#[test]
fn sixteen_aligned_blocks_are_counted_grown_moved_and_credited() {
    let node = node();
    let (figures, aligned, queued_delta, received_delta) = node
        .run(async {
            let start = me();
            let boxed = Box::new(Sixteen([1; 48]));
            let one = me();
            let mut wide: Vec<u128> = Vec::with_capacity(2);
            wide.extend([1, 2]);
            wide.reserve_exact(2); // 32 -> 64 bytes, through realloc
            let grown = me();
            let aligned = (&*boxed as *const Sixteen as usize).is_multiple_of(16)
                && (wide.as_ptr() as usize).is_multiple_of(16)
                && wide == [1, 2];
            drop(boxed);
            drop(wide);
            let end = me();
            let figures = [
                one.blocks - start.blocks,
                one.bytes - start.bytes,
                one.live_bytes - start.live_bytes,
                grown.blocks - one.blocks,
                grown.bytes - one.bytes,
                grown.live_bytes - one.live_bytes,
                end.live_bytes.abs_diff(start.live_bytes),
            ];
            // A 16-aligned message's envelope moves to the receiver with it.
            let parent = self_pid();
            let (child, _) = spawn_monitor(async move {
                let before = me();
                send(parent, ());
                let _: () = receive().await; // the Sixteen is queued behind this
                let queued = me();
                let got: Sixteen = receive().await;
                assert_eq!(got.0[47], 9);
                let received = me();
                send(
                    parent,
                    (
                        queued.live_bytes as i64 - before.live_bytes as i64,
                        received.live_bytes as i64 - queued.live_bytes as i64,
                    ),
                );
            })
            .unwrap();
            let () = receive().await;
            send(child, Sixteen([9; 48]));
            send(child, ());
            let deltas: (i64, i64) = receive().await;
            let _: Down = receive().await;
            (figures, aligned, deltas.0, deltas.1)
        })
        .unwrap();
    assert!(aligned);
    assert_eq!(figures, [1, 48, 48, 2, 32 + 64, 64, 0]);
    assert!(queued_delta >= 48, "queued: {queued_delta}");
    assert!(received_delta <= -48, "received: {received_delta}");
}

#[test]
fn a_block_freed_by_another_process_credits_its_owner() {
    let node = node();
    let (owner_before, owner_after, freer_delta) = node
        .run(async {
            let me_pid = self_pid();
            let freer = spawn(async move {
                let data: Vec<u8> = receive().await;
                let before = me();
                drop(data);
                let after = me();
                send(
                    me_pid,
                    (after.live_bytes as i64) - (before.live_bytes as i64),
                );
            })
            .unwrap();
            // The owner's mailbox buffers are allocated once, on first use: warm them.
            send(me_pid, 0i64);
            let _: i64 = receive().await;
            let data = vec![7u8; 4096];
            let owner_before = me();
            send(freer, data);
            let freer_delta: i64 = receive().await;
            (owner_before, me(), freer_delta)
        })
        .unwrap();
    assert_eq!(freer_delta, 0, "the freer never owned the vec's buffer");
    // The owner lost the buffer (4096 bytes); it allocated the message envelope (24 bytes, a
    // Vec by value), which moved to the freer with the message.
    assert_eq!(owner_before.live_bytes - owner_after.live_bytes, 4096);
}

#[test]
fn a_queued_envelope_belongs_to_the_receiver() {
    let node = node();
    let (before, queued, received) = node
        .run(async {
            let parent = self_pid();
            let (child, _) = spawn_monitor(async move {
                let go: &'static str = receive().await;
                assert_eq!(go, "go");
                let before = me();
                send(parent, before);
                let _: Duration = receive().await;
                let queued = me();
                send(parent, queued);
                let payload: [u64; 256] = receive().await;
                assert_eq!(payload[255], 255);
                send(parent, me());
            })
            .unwrap();
            send(child, "go");
            let before: HeapStats = receive().await;
            let mut payload = [0u64; 256];
            for (i, x) in payload.iter_mut().enumerate() {
                *x = i as u64;
            }
            send(child, payload); // a 2048-byte envelope
            send(child, Duration::ZERO);
            let queued: HeapStats = receive().await;
            let received: HeapStats = receive().await;
            let _: Down = receive().await;
            (before, queued, received)
        })
        .unwrap();
    assert!(
        queued.live_bytes >= before.live_bytes + 2048,
        "queued: {queued:?}, before: {before:?}"
    );
    assert!(
        queued.bytes - before.bytes < 2048,
        "the receiver did not allocate the envelope"
    );
    assert!(received.live_bytes < queued.live_bytes - 2000);
}

#[test]
fn a_free_after_the_owner_is_gone_is_harmless() {
    let node = node();
    let live = node
        .run(async {
            let parent = self_pid();
            let (owner, _) = spawn_monitor(async move {
                send(parent, vec![1u8; 10_000]);
            })
            .unwrap();
            let data: Vec<u8> = receive().await;
            let down: Down = receive().await;
            assert_eq!(down.pid, owner);
            let before = me();
            drop(data);
            (before.live_bytes, me().live_bytes)
        })
        .unwrap();
    assert_eq!(live.0, live.1);
}

#[test]
fn a_new_process_is_charged_for_its_own_bookkeeping() {
    let node = node();
    let (parent_growth, child) = node
        .run(async {
            let parent = self_pid();
            // Warm the parent's own one-off allocations (its monitor list) first.
            spawn_monitor(async {}).unwrap();
            let _: Down = receive().await;
            let mut pids: Vec<Pid> = Vec::with_capacity(100);
            let during = me();
            for _ in 0..100 {
                pids.push(
                    spawn(async move {
                        let () = receive().await;
                        let _ = parent;
                    })
                    .unwrap(),
                );
            }
            let after = me();
            let child = heap::process_heap(pids[50]).unwrap();
            for pid in pids {
                send(pid, ());
            }
            (after.bytes - during.bytes, child)
        })
        .unwrap();
    assert!(
        child.bytes >= 400,
        "a process's record, task and mailbox are its own: {child:?}"
    );
    assert!(
        parent_growth < 100 * 8,
        "the parent paid {parent_growth} bytes for 100 spawns"
    );
}

#[test]
fn helpers_work_is_charged_to_their_process() {
    let node = node();
    let (before, after) = node
        .run(async {
            let before = me();
            let handle = spawn_blocking(|| {
                let v = vec![0u8; 50_000];
                std::hint::black_box(v).len()
            });
            assert_eq!(handle.unwrap().await.unwrap(), 50_000);
            (before, me())
        })
        .unwrap();
    assert!(
        after.bytes - before.bytes >= 50_000,
        "{before:?} -> {after:?}"
    );
}

#[test]
fn max_heap_size_ends_a_process_that_keeps_allocating() {
    let node = node();
    let down = node
        .run(async {
            let (pid, _) = spawn_opt(
                async {
                    let mut kept: Vec<Vec<u8>> = Vec::new();
                    loop {
                        kept.push(vec![0u8; 64 * 1024]);
                        tokio::task::yield_now().await;
                    }
                },
                SpawnOptions::new().monitor().max_heap_size(1 << 20),
            )
            .map(|s| (s.pid, s.monitor))
            .unwrap();
            let down: Down = receive().await;
            assert_eq!(down.pid, pid);
            down
        })
        .unwrap();
    assert_eq!(down.reason, ExitReason::MaxHeapSize);
}

#[test]
fn max_heap_size_is_checked_at_a_runtime_call_too() {
    let node = node();
    let down = node
        .run(async {
            let me_pid = self_pid();
            spawn_opt(
                async move {
                    let mut kept: Vec<Vec<u8>> = Vec::new();
                    // Never yields: only the runtime call can end it.
                    for _ in 0..1000 {
                        kept.push(vec![0u8; 64 * 1024]);
                        send(me_pid, kept.len());
                    }
                },
                SpawnOptions::new().monitor().max_heap_size(1 << 20),
            )
            .unwrap();
            let down: Down = receive().await;
            let mut sent = 0;
            while let Some(n) = runtime::receive_timeout::<usize>(Duration::ZERO).await {
                sent = n;
            }
            (down, sent)
        })
        .unwrap();
    assert_eq!(down.0.reason, ExitReason::MaxHeapSize);
    assert!(
        down.1 <= 17,
        "ended soon after 1 MiB, at the {}th send",
        down.1
    );
}

#[test]
fn max_message_queue_len_ends_a_process_whose_mailbox_overflows() {
    let node = node();
    let down = node
        .run(async {
            let spawned = spawn_opt(
                async {
                    let () = receive().await; // never sent
                },
                SpawnOptions::new().monitor().max_message_queue_len(10),
            )
            .unwrap();
            for i in 0..11u32 {
                send(spawned.pid, i);
            }
            let down: Down = receive().await;
            down
        })
        .unwrap();
    assert_eq!(down.reason, ExitReason::MaxMessageQueueLen);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Many processes on two workers, each allocating known sizes with yields in between (so
    /// they move between workers): every process's figures are exact.
    #[test]
    fn every_process_figure_is_exact_while_processes_migrate(
        sizes in proptest::collection::vec(proptest::collection::vec(1usize..5000, 1..20), 2..24)
    ) {
        let node = node();
        let expected: Vec<[u64; 4]> = sizes
            .iter()
            .map(|s| {
                let words = s.iter().map(|n| n.div_ceil(8) as u64).sum();
                let bytes: u64 = s.iter().map(|n| *n as u64).sum();
                [words, bytes, s.len() as u64, bytes]
            })
            .collect();
        let n = sizes.len();
        let measured = node
            .run(async move {
                let parent = self_pid();
                for (i, s) in sizes.into_iter().enumerate() {
                    spawn(async move {
                        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(s.len());
                        let mut sum = [0u64; 4];
                        for n in s {
                            let before = me();
                            kept.push(Vec::with_capacity(n));
                            let after = me();
                            sum[0] += after.words - before.words;
                            sum[1] += after.bytes - before.bytes;
                            sum[2] += after.blocks - before.blocks;
                            sum[3] += after.live_bytes - before.live_bytes;
                            tokio::task::yield_now().await;
                        }
                        send(parent, (i, sum));
                    })
                    .unwrap();
                }
                let mut measured = vec![[0u64; 4]; n];
                for _ in 0..n {
                    let (i, sum): (usize, [u64; 4]) = receive().await;
                    measured[i] = sum;
                }
                measured
            })
            .unwrap();
        prop_assert_eq!(measured, expected);
    }
}

/// An inner allocator that records the layout it was last asked for.
struct Recording {
    last: std::sync::Mutex<Option<std::alloc::Layout>>,
}

// SAFETY: forwards to `System` unchanged; only records the layout.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        *self.last.lock().unwrap() = Some(layout);
        // SAFETY: the caller's contract is GlobalAlloc's.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        *self.last.lock().unwrap() = Some(layout);
        // SAFETY: the caller's contract is GlobalAlloc's.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[test]
fn a_block_carries_at_most_16_bytes_of_tag_and_keeps_its_alignment() {
    use std::alloc::{GlobalAlloc, Layout};
    let counting = runtime::CountingAlloc::new(Recording {
        last: std::sync::Mutex::new(None),
    });
    for align in [1usize, 2, 8, 16, 32, 64, 128, 4096] {
        for size in [1usize, 8, 24, 64, 100, 512, 5000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a non-zero-sized layout; the block is written within its size, then freed
            // once with the same layout by the allocator that made it.
            #[allow(unsafe_code)]
            unsafe {
                let p = counting.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "{layout:?}");
                p.write_bytes(0xab, size);
                let outer = counting.inner().last.lock().unwrap().unwrap();
                let overhead = outer.size() - size;
                assert!(overhead <= 16, "{layout:?}: {overhead} bytes of tag");
                if align <= 8 {
                    assert_eq!(overhead, 8, "{layout:?}");
                }
                let grown = counting.realloc(p, layout, size * 2);
                assert_eq!(grown as usize % align, 0, "{layout:?}");
                assert!(
                    std::slice::from_raw_parts(grown, size)
                        .iter()
                        .all(|b| *b == 0xab)
                );
                counting.dealloc(grown, Layout::from_size_align(size * 2, align).unwrap());
            }
        }
    }
}

#[test]
fn first_use_allocations_of_timers_and_stdout_are_warmed_at_node_start() {
    let node = node();
    let (sleep, print) = node
        .run(async {
            let before = me();
            tokio::time::sleep(Duration::from_millis(1)).await;
            let after_sleep = me();
            let _ = std::io::Write::flush(&mut std::io::stdout());
            let after_print = me();
            (
                after_sleep.blocks - before.blocks,
                after_print.blocks - after_sleep.blocks,
            )
        })
        .unwrap();
    assert_eq!((sleep, print), (0, 0));
}

/// The profiler's reading of the OS's run queue (a call_time session's, at its snapshot or
/// through `TraceSession::run_queue`) allocates a thread list and each thread's figures: its
/// own work, charged to no process, even when a process takes it.
#[test]
fn a_run_queue_reading_is_charged_to_no_process() {
    let node = node();
    let session = std::sync::Arc::new(
        node.trace_session_with(runtime::trace::TraceTypes::CALL_TIME)
            .unwrap(),
    );
    let (before, read, after) = node
        .run({
            let session = std::sync::Arc::clone(&session);
            async move {
                let before = me();
                let read = session.run_queue();
                (before, read, me())
            }
        })
        .unwrap();
    if cfg!(target_os = "linux") && std::path::Path::new("/proc/self/schedstat").exists() {
        assert!(read.is_some(), "the figures were read");
    }
    assert_eq!(after.blocks, before.blocks, "{before:?} {after:?}");
    assert_eq!(after.bytes, before.bytes);
}
