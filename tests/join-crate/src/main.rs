//! A traced function calling untraced helpers, as a user's program is: `crunch` hashes and
//! parses text it builds, on a node whose runtime `TPROF_RUN` profiles.

use std::hint::black_box;

/// Counts allocations, for `TPROF_RUN_SAMPLER=alloc`.
#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// FNV-1a over `bytes`, a few rounds: the hot untraced helper.
#[inline(never)]
fn fnv_hash(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    for _ in 0..64 {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The numbers of `text`, summed: the cooler untraced helper.
#[inline(never)]
fn parse(text: &str) -> u64 {
    text.split(',').filter_map(|n| n.parse::<u64>().ok()).sum()
}

/// The traced function: builds text (allocating in its own body), hashes and parses it.
#[runtime::traced]
fn crunch(rounds: u64) -> u64 {
    let mut total = 0u64;
    for i in 0..rounds {
        let text: String = black_box(format!("{i},{},{}", i * 7, i * 13)); // ALLOC LINE
        total = total.wrapping_add(fnv_hash(text.as_bytes())); // HOT LINE
        total = total.wrapping_add(parse(&text));
    }
    total
}

/// A traced worker: crunches until it has done `batches` batches.
#[runtime::traced]
async fn worker(batches: u64) -> u64 {
    let mut total = 0u64;
    for _ in 0..batches {
        total = total.wrapping_add(crunch(black_box(2_000)));
        tokio::task::yield_now().await;
    }
    total
}

fn main() {
    let batches: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let node = runtime::Node::builder()
        .worker_threads(1)
        .build()
        .expect("a node");
    let (tx, rx) = std::sync::mpsc::channel();
    node.spawn(async move {
        let _ = tx.send(worker(batches).await);
    })
    .expect("spawn");
    let total = rx.recv().expect("the worker's total");
    println!("total {total}");
    drop(node);
}
