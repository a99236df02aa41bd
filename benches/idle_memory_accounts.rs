//! Idle memory per process of the runtime's rows (see `idle_memory`), with
//! `runtime::CountingAlloc` installed, as a program that reads heap figures has it: each
//! process then has a heap account, and each block carries an 8-byte owner tag, both counted
//! here (the counter sits under `CountingAlloc`, so it sees the bytes `CountingAlloc` asks for).
//!
//! Run with `cargo bench --bench idle_memory_accounts` (optionally `-- FILTER`).

#[path = "idle_memory/rows.rs"]
#[allow(dead_code)] // The rows of the other runtimes are not run here.
mod rows;

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: runtime::CountingAlloc<rows::Counting> = runtime::CountingAlloc::new(rows::Counting);

fn main() -> ExitCode {
    assert!(
        runtime::heap::installed(),
        "CountingAlloc is the global allocator"
    );
    rows::main(&["runtime_receive", "runtime_gen_server"])
}
