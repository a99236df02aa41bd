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
//! the *current process* of the polling thread, so [`self_pid`], [`send`](fn@send), [`receive`],
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
//! # Tracing and sampling
//!
//! The runtime carries the machinery a profiler needs, as the BEAM carries its trace BIFs:
//! traced functions and trace sessions ([`trace`]: call counts, time and memory per process
//! and function, `#[traced]`), per-process heap accounts ([`heap`]), and the samplers
//! ([`sample`]: what each worker thread runs, from a CPU-time timer per thread, and where every
//! process waits). The `tprof` crate turns them into reports. [`introspect`] walks a node's
//! processes (what each holds and is tied to) without stopping it, and [`heap_snapshot`] writes
//! that as a Chrome DevTools heap snapshot.
//!
//! # Moving instead of copying
//!
//! Erlang copies a message into the receiver's heap; Rust moves it. What a process's code
//! allocates belongs to whoever allocates it, and a message is boxed once, when sent.
//!
//! # Layers
//!
//! The sources are laid in layers; **a file of one layer names no module of a higher one**
//! (by `crate::` path, re-export or `super::`). A higher layer that a lower one must reach
//! fills a slot the lower one defines (a [`linkme`](https://docs.rs/linkme) slice of
//! functions, gathered at link time), so the lower one calls it without naming it; hot-path
//! flags stay inline in the lower layer. `tests/layers.rs` checks the rule.
//!
//! | layer | modules | owns |
//! | --- | --- | --- |
//! | 1 plain data | `pid`, `exit`, `name`, `segmented`, `sampled` | pids, exit reasons, registered names, small collections, a sample profile's data |
//! | 2 the thread's context | `context` | which process and node the thread runs, for the layers below the process world |
//! | 3 heap accounting | [`heap`], `message` | the counting allocator, accounts, allocation sampling's recorder; messages charged to accounts |
//! | 4 tracing | [`trace`] | callsites, traced stacks, measurements, sessions, the environment's run names |
//! | 5 processes and nodes | `world` | process records, spawning, polls, mailboxes, signals, timers, names, sending, nodes |
//! | 6 observers | [`sample`], [`introspect`], [`heap_snapshot`], `run` | samplers, introspection, heap snapshots, the run mode (`TPROF_RUN`) |
//! | 7 behaviours | [`gen_server`], [`supervisor`] | OTP's behaviours |
//!
//! Where a lower layer works on a higher layer's things, it defines the trait it needs and the
//! higher layer implements it: tracing's `TracedProcess` (read at each poll, generic: resolved
//! at compile time) and `SessionNode` (a session's node, behind a trait object: off the hot
//! path) are implemented by the process layer's records and nodes.

// The runtime's own API is traced, as BIFs are on the BEAM. `#[traced]` names `::runtime`,
// inside this crate too; and each traced function here carries `#[allow(unsafe_code)]`,
// because the callsite static it registers is a linkme `link_section` static, which the
// `unsafe_code` lint flags in the crate that defines the slice (it stays quiet in crates
// that only use the macro, `forbid(unsafe_code)` ones included).
// With the feature `no-trace`, `#[traced]` expands to the bare function and the name is unused.
#[cfg_attr(feature = "no-trace", allow(unused_extern_crates))]
extern crate self as runtime;

mod context;
mod exit;
pub mod gen_server;
pub mod heap;
pub mod heap_snapshot;
pub mod introspect;
mod message;
mod name;
mod pid;
mod run;
pub mod sample;
mod sampled;
mod segmented;
pub mod supervisor;
pub mod trace;
mod world;

pub(crate) use world::{mailbox, node, process, registry, send, signal, timer};

/// Traces a function, or every method of an `impl` block: its calls can then be counted, timed
/// and charged the memory they allocate, by a [`TraceSession`](trace::TraceSession) of the
/// runtime or by `tprof`.
///
/// The attribute registers one static [`Callsite`](trace::Callsite) per function at compile
/// time — module, name, arity, file, line: the function is in the trace map before it is ever
/// called — and wraps the body so that a call enters and leaves a traced frame. While no
/// session traces the function, a call costs one relaxed load (see [`trace`] for the
/// figures).
///
/// # Names
///
/// A function is named as the trace map prints it, `module::path::function/arity`: the
/// module is `module_path!()` where the function is written, the arity counts `self`, methods
/// of an `impl` block are `Type::method` and methods of a trait impl `<Type as
/// Trait>::method` (the attribute on the block is how a method gets its type's name, which an
/// attribute on the method alone cannot see). [`TracePattern`](trace::TracePattern)s select
/// functions by these names. Three options change them:
///
/// | option | on | effect |
/// | --- | --- | --- |
/// | `name = "..."` | a function, or a method of a traced `impl` | the whole name (for a method, in place of `Type::method`) |
/// | `module = "..."` | a function, or a method of a traced `impl` | the module path it is filed under instead of `module_path!()` |
/// | `skip` | a method of a traced `impl` (or a function) | leaves it untraced |
///
/// ```
/// use runtime::trace::callsites;
///
/// #[runtime::traced]
/// fn parse_line(line: &str) -> usize { line.split(',').count() }
///
/// #[runtime::traced(name = "checkout", module = "shop")]
/// fn checkout_v2(total: u32) -> u32 { total }
///
/// struct Cart { items: Vec<u32> }
///
/// #[runtime::traced]
/// impl Cart {
///     fn add(&mut self, item: u32) { self.items.push(item) }
///
///     #[traced(skip)] // too small to be worth a frame
///     fn len(&self) -> usize { self.items.len() }
/// }
///
/// trait Priced { fn total(&self) -> u32; }
///
/// #[runtime::traced]
/// impl Priced for Cart {
///     fn total(&self) -> u32 { self.items.iter().sum() }
/// }
///
/// let here = module_path!();
/// let names: Vec<String> = callsites()
///     .iter()
///     .filter(|c| c.module() == here || c.module() == "shop")
///     .map(|c| c.to_string())
///     .collect();
/// for name in [
///     format!("{here}::parse_line/1"),
///     "shop::checkout/1".to_owned(),
///     format!("{here}::Cart::add/2"),
///     format!("{here}::<Cart as Priced>::total/1"),
/// ] {
///     assert!(names.contains(&name), "{name} in {names:?}");
/// }
/// assert!(!names.iter().any(|n| n.contains("Cart::len")), "skipped");
/// ```
///
/// # Shapes
///
/// - a `fn`, generic or not: the call is the frame, from entry to return (or to a panic
///   unwinding through it);
/// - an `async fn`: the call is entered at the future's first poll and left when it completes;
///   the time and memory of each poll in between count, not the waits. A free `async fn` whose
///   signature names no lifetime becomes a `fn` returning `impl Future` with the same output:
///   one state machine instead of two, its parameters still moved into the future;
/// - a `fn` returning `impl Future`: the returned future is what is traced, as for an
///   `async fn`;
/// - a `fn` returning `Pin<Box<dyn Future ...>>`, which is what `#[async_trait]` makes of an
///   `async fn`: the boxed future is traced, whichever of the two attributes runs first;
/// - an `impl` block, inherent or of a trait: every method, in any of these shapes.
///
/// A `const fn` is refused (it may run at compile time), and so is any other item.
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
///
/// use runtime::Node;
/// use runtime::trace::TracePattern;
///
/// #[runtime::traced]
/// async fn fetch(key: u32) -> u32 {
///     tokio::task::yield_now().await; // one call, however many polls
///     key * 2
/// }
///
/// #[runtime::traced]
/// fn fetch_later(key: u32) -> impl Future<Output = u32> {
///     async move { key + 1 }
/// }
///
/// #[runtime::traced]
/// fn fetch_boxed(key: u32) -> Pin<Box<dyn Future<Output = u32> + Send>> {
///     Box::pin(async move { key })
/// }
///
/// let node = Node::new().unwrap();
/// let session = node.trace_session().unwrap();
/// session.set_pattern(&TracePattern::module(module_path!())).unwrap();
/// let sum = node
///     .run(async { fetch(1).await + fetch(2).await + fetch_later(3).await + fetch_boxed(4).await })
///     .unwrap();
/// assert_eq!(sum, 2 + 4 + 4 + 4);
/// let calls = |name: &str| {
///     session.call_counts().iter().find(|c| c.callsite.function() == name).map(|c| c.calls)
/// };
/// assert_eq!(calls("fetch"), Some(2));
/// assert_eq!(calls("fetch_later"), Some(1));
/// assert_eq!(calls("fetch_boxed"), Some(1));
/// ```
///
/// An option the attribute does not know is a compile error that lists the ones it does:
///
/// ```compile_fail
/// #[runtime::traced(label = "parse")] // expected `name = "..."`, `module = "..."` or `skip`
/// fn parse(line: &str) -> usize { line.len() }
/// ```
///
/// # A block, and no tracing at all
///
/// [`trace::traced!`] traces a block as a call of its own. With the feature `no-trace` the
/// attribute leaves code exactly as written (no callsite, no frame, no cost):
/// [`trace::INSTRUMENTED`] is then false, and setting a pattern says instrumentation is
/// compiled out.
#[doc(inline)]
pub use runtime_macros::traced;

#[doc(hidden)]
pub mod __private {
    pub use linkme;
}

pub use exit::{Exit, ExitReason, FnReturn, IntoExitReason, Never};
pub use heap::CountingAlloc;
pub use message::Message;
pub use name::{Name, ProcessRef};
pub use pid::{ParsePidError, Pid};
pub use world::mailbox::{
    ReceiveMatch, receive, receive_any, receive_any_timeout, receive_match, receive_timeout,
    receive_where,
};
pub use world::node::{
    DEFAULT_SHUTDOWN_GRACE, ExitWatch, Node, NodeBuilder, NodeError, NodeHandle,
};
pub use world::process::{
    ProcessInfo, ProcessStatus, SpawnError, SpawnOptions, Spawned, process_info, processes,
    self_pid, spawn, spawn_blocking, spawn_link, spawn_monitor, spawn_opt, spawn_task,
    try_self_pid,
};
pub use world::registry::{RegistryError, register, registered, unregister, whereis};
pub use world::send::{SendError, send, send_named};
pub use world::signal::{
    Down, LinkError, MonitorRef, demonitor, exit, exit_self, link, monitor, trap_exit, unlink,
};
