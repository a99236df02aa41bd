//! Idle memory per process: the runtime against raw tokio, ractor and kameo (issue #2).
//!
//! Run with `cargo bench --bench idle_memory` (optionally followed by `-- FILTER`, a substring
//! of the row names below). The binary re-executes itself once per row, so that each is
//! measured in a fresh OS process; the child spawns `IDLE_MEMORY_PROCESSES` (default 100,000)
//! idle processes, actors or tasks, waits until every one of them has run and is parked
//! waiting for a message, and reports:
//!
//! - **requested bytes** per process: live bytes requested from the allocator (a counting
//!   `#[global_allocator]` defined here) after the spawns, minus before, divided by the count.
//!   It includes everything the spawns allocate: tokio's task cell with the future in it, the
//!   mailbox or channel, the process table's slots (the runtime) and whatever the actor crates
//!   allocate per actor. It excludes the spawner's vector of handles (allocated before the
//!   first measurement; the runtime needs none, a pid is `Copy`).
//! - **live blocks** per process: allocations still live, per process.
//! - **RSS growth** per process: `VmRSS` (`/proc/self/status`, the resident set that
//!   `/proc/self/statm` reports in pages) after minus before, divided by the count.
//!
//! Rows: `runtime_receive` (a bare `receive` loop), `runtime_gen_server` (a gen_server with
//! unit state), `tokio_mpsc` (a task looping on an unbounded channel's `recv`), `ractor` (an
//! actor with unit state; its mailbox is unbounded), `kameo_unbounded` and `kameo_bounded64`
//! (an actor with unit state, with an unbounded mailbox and with kameo's default bounded one of
//! 64), each on a `current_thread` and a `2_workers` scheduler.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs every row with 1,000 processes,
//! as a smoke test.
//!
//! Where a runtime row's requested bytes go, at 100,000 processes (2 blocks per process):
//! the process record (`Arc<Process>`, 480 bytes), tokio's task cell with the process's future
//! in it (256 bytes for both rows: cells are 128-byte aligned, so a future a few bytes too big
//! costs 128 more), its process-table slot (16 bytes in doubling segments: ~21) and its entry in
//! the table's slab of indices (16 bytes in a doubling `Vec`: ~21); with a `current_thread`
//! scheduler the receive row also counts tokio's run queue (~10), as its processes are all
//! spawned before any runs. This program does not install `runtime::CountingAlloc`, so its
//! processes have no heap account; `idle_memory_accounts` measures the runtime's rows with it
//! installed (over the same counter), where each process has one more block (its 128-byte
//! account, in doubling segments) and each block an 8-byte tag. The RSS figure depends on how
//! glibc packs the two blocks: the record's 496-byte chunk and the cell's 272-byte one add up
//! to six 128-byte lines, so the cells' alignment leaves no gaps; other sizes can cost more
//! RSS than they save.

#[path = "idle_memory/rows.rs"]
mod rows;

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: rows::Counting = rows::Counting;

fn main() -> ExitCode {
    rows::main(&rows::ROWS)
}
