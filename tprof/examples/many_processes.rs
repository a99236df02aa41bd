//! Many processes for the exports' scale (issue 31): N processes (100,000 by default, or the
//! first argument), each calling the traced `work` once and then waiting in `receive` until the
//! program ends, about `SECONDS` (the second argument, default 1.5) after the last one
//! started. Under `tprof run --sampler wall` every process is sampled waiting; under
//! `tprof run --type call_time` each has a row of its own:
//!
//! It counts its allocations (`runtime::CountingAlloc`), so `tprof run --mode alloc` samples
//! them too.
//!
//! ```sh
//! cargo build --release -p tprof --example many_processes
//! tprof run --sampler wall -o wall.tprof -- target/release/examples/many_processes
//! tprof report wall.tprof -o wall.svg
//! ```

use std::time::Duration;

use runtime::{Node, receive};

/// Counts what each process allocates, for `tprof run --mode alloc`.
#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// A little work, traced.
#[runtime::traced(module = "many_processes")]
fn work(n: u64) -> u64 {
    (0..n).fold(0, |a, b| a ^ b.wrapping_mul(0x9e37_79b9))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(100_000, |a| {
        a.parse()
            .expect("the first argument is a number of processes")
    });
    let seconds: f64 = args
        .next()
        .map_or(1.5, |a| a.parse().expect("the second argument is seconds"));
    let node = Node::new().expect("start a node");
    for i in 0..n {
        node.handle()
            .spawn(async move {
                std::hint::black_box(work(i % 64));
                // Something to sample in allocation mode: a block of its own, freed at once.
                std::hint::black_box(vec![0u8; 64 + (i % 4096) as usize]);
                let _: () = receive().await;
            })
            .expect("spawn a process");
    }
    println!("started {n}");
    std::thread::sleep(Duration::from_secs_f64(seconds));
    node.stop();
}
