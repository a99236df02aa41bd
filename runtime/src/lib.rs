//! An Erlang-style actor runtime on tokio.
//!
//! Processes with pids and mailboxes, links, monitors, exit signals, registered names,
//! supervisors and a gen_server behaviour, with Erlang's semantics, on a tokio runtime. It is
//! the "VM" half of this workspace: the `tprof` crate profiles programs built on it, the way
//! OTP's `tprof` profiles BEAM processes.
//!
//! # What a process is
//!
//! A process is a future run as a tokio task that the runtime wraps: every poll of it makes it
//! the *current process* of the polling thread, so [`self_pid`], [`send`], [`receive`],
//! [`spawn`], [`link`] and the rest find it without being handed a context. It has a pid
//! ([`Pid`], printed `<node.index.serial>`), a mailbox that takes messages of any
//! `Send + 'static` type, a spawning parent and an initial call ([`process_info`]). It ends
//! when its future returns (the output becomes its [`ExitReason`]), panics
//! ([`ExitReason::Panic`]), calls [`exit_self`], or is ended by an exit signal; its links and
//! monitors are then told.
//!
//! ```
//! use runtime::{Down, ExitReason, Node, receive, send, self_pid, spawn_monitor};
//!
//! let node = Node::new().unwrap();
//! let outcome = node.run(async {
//!     let me = self_pid();
//!     let (worker, _mref) = spawn_monitor(async move {
//!         let n: u64 = receive().await;
//!         send(me, n * 2);
//!         if n > 10 {
//!             panic!("too big");
//!         }
//!     })
//!     .unwrap();
//!     send(worker, 21u64);
//!     let doubled: u64 = receive().await;
//!     let down: Down = receive().await;
//!     (doubled, down.reason)
//! });
//! assert_eq!(outcome.unwrap(), (42, ExitReason::Panic("too big".into())));
//! ```
//!
//! # Nodes
//!
//! A [`Node`] owns the process table and names, and runs its processes on its own tokio
//! runtime or on one the program already has ([`Node::start_on`]). Nodes are independent, so
//! each test can have its own.
//!
//! # Panics are exits
//!
//! A panic in a process ends that process only: it becomes [`ExitReason::Panic`], reaches its
//! links and monitors, and never takes the node down. This relies on `panic = "unwind"` (the
//! default); with `panic = "abort"` a panicking process aborts the OS process.
//!
//! # Moving instead of copying
//!
//! Erlang copies a message into the receiver's heap; Rust moves it. What a process's code
//! allocates belongs to whoever allocates it, and a message is boxed once, when sent.

// The runtime's own API is traced, as BIFs are on the BEAM. `#[traced]` names `::runtime`,
// inside this crate too; and each traced function here carries `#[allow(unsafe_code)]`,
// because the callsite static it registers is a linkme `link_section` static, which the
// `unsafe_code` lint flags in the crate that defines the slice (it stays quiet in crates
// that only use the macro, `forbid(unsafe_code)` ones included).
// With the feature `no-trace`, `#[traced]` expands to the bare function and the name is unused.
#[cfg_attr(feature = "no-trace", allow(unused_extern_crates))]
extern crate self as runtime;

mod exit;
pub mod gen_server;
pub mod heap;
mod mailbox;
mod message;
mod node;
mod pid;
mod process;
mod registry;
mod segmented;
mod send;
mod signal;
pub mod supervisor;
mod timer;
pub mod trace;

pub use runtime_macros::traced;

#[doc(hidden)]
pub mod __private {
    pub use linkme;
}

pub use exit::{Exit, ExitReason, FnReturn, IntoExitReason, Never};
pub use heap::CountingAlloc;
pub use mailbox::{
    ReceiveMatch, receive, receive_any, receive_any_timeout, receive_match, receive_timeout,
    receive_where,
};
pub use message::Message;
pub use node::{DEFAULT_SHUTDOWN_GRACE, ExitWatch, Node, NodeBuilder, NodeError, NodeHandle};
pub use pid::{ParsePidError, Pid};
pub use process::{
    ProcessInfo, ProcessStatus, SpawnError, SpawnOptions, Spawned, process_info, processes,
    self_pid, spawn, spawn_blocking, spawn_link, spawn_monitor, spawn_opt, spawn_task,
    try_self_pid,
};
pub use registry::{Name, RegistryError, register, registered, unregister, whereis};
pub use send::{SendError, send, send_named};
pub use signal::{
    Down, LinkError, MonitorRef, demonitor, exit, exit_self, link, monitor, trap_exit, unlink,
};
