//! Supervisors: processes that start, watch and restart other processes, as OTP's
//! `supervisor`.
//!
//! # Model
//!
//! A supervisor is a process that traps exits. It starts its children one by one, in the order
//! of its [`ChildSpec`]s, each linked to it, and answers its starter once they are all running
//! (if one fails to start, the ones already started are stopped in reverse order and the start
//! fails with [`StartError::ChildFailed`] naming it). It then loops on its mailbox:
//!
//! - a child's [`Exit`] message: the child is restarted or not according to its [`Restart`]
//!   type, and then according to the supervisor's [`Strategy`];
//! - an [`Exit`] from its parent, or from itself (how [`NodeHandle::shutdown`] and
//!   `exit(sup, reason)` from outside a process reach it), or a [`stop`] request: it stops
//!   every child, last started first, and exits with that reason ([`stop`] returns once it
//!   has);
//! - a request ([`which_children`], [`count_children`], [`terminate_child`], [`restart_child`],
//!   [`delete_child`]), answered through a one-shot channel, so they work from a process or
//!   from any async code;
//! - anything else is dropped (OTP logs it as unexpected).
//!
//! ```text
//!  start ──► starting children ──(all up)──► supervising ◄──┐
//!                 │                            │  │  │       │ child exit: restart per
//!                 │ a child fails              │  │  └───────┘ Restart type and Strategy
//!                 ▼                            │  │ too many restarts
//!     stop started (reverse), exit             │  ▼
//!                                              │  stop all (reverse), exit
//!                                              │  `reached_max_restart_intensity`
//!                                              ▼ Exit from parent / itself
//!                                        stop all (reverse), exit with its reason
//! ```
//!
//! # Strategies
//!
//! When child C is to be restarted:
//!
//! | [`Strategy`]   | stopped first (reverse start order) | then started (start order) |
//! |----------------|-------------------------------------|----------------------------|
//! | `OneForOne`    | none                                | C                          |
//! | `OneForAll`    | every other running child           | every child                |
//! | `RestForOne`   | the children started after C        | C and the ones after it    |
//!
//! A temporary child stopped by a group restart is not started again; it leaves the list.
//!
//! # Restart types
//!
//! | [`Restart`]  | ends `Normal` or `Shutdown`              | ends any other way         |
//! |--------------|------------------------------------------|----------------------------|
//! | `Permanent`  | restarted                                | restarted                  |
//! | `Transient`  | not restarted; stays listed, not running | restarted                  |
//! | `Temporary`  | not restarted; leaves the list           | not restarted; leaves it   |
//!
//! ("Any other way" is [`ExitReason::is_abnormal`].)
//!
//! # Restart intensity
//!
//! At most [`SupervisorFlags::intensity`] restarts in any [`SupervisorFlags::period`] (OTP's
//! defaults: 1 in 5 s). The restart that would exceed it is refused: the supervisor stops every
//! child, last started first, and exits with [`reached_max_restart_intensity`], which its own
//! supervisor sees like any other crash. A child that fails to start when it is restarted is
//! retried (through a message the supervisor sends itself, so requests are still served), and
//! each retry counts as a restart.
//!
//! # Stopping a child
//!
//! The supervisor monitors the child, unlinks it, and then, by its [`Shutdown`] policy:
//!
//! | [`Shutdown`]   | what the supervisor does                                          |
//! |----------------|-------------------------------------------------------------------|
//! | `BrutalKill`   | sends [`ExitReason::Kill`]                                        |
//! | `Timeout(d)`   | sends [`ExitReason::Shutdown`]; after `d` without an exit, `Kill` |
//! | `Infinity`     | sends [`ExitReason::Shutdown`] and waits as long as it takes      |
//!
//! and waits for the monitor's [`Down`]. A child that does not trap exits dies of `Shutdown` at
//! once; one that traps exits receives `Exit { from: supervisor, reason: Shutdown }` and should
//! clean up and return (a [`gen_server`] started with
//! `StartOptions::trap_exit` runs its `terminate`). Workers default to `Timeout(5 s)`,
//! supervisors to `Infinity`, as in OTP.
//!
//! # Node shutdown
//!
//! A supervisor marks its process as one, so that [`NodeHandle::shutdown`] (and [`Node::stop`])
//! sends `Shutdown` to the root supervisors before anything else: each stops its children in
//! reverse start order, nested supervisors included, before the rest of the node is stopped.
//!
//! # Example
//!
//! ```
//! use runtime::supervisor::{self, ChildSpec, Strategy, SupervisorFlags, SupervisorSpec};
//! use runtime::{Node, receive};
//! use std::time::Duration;
//!
//! async fn worker() {
//!     let () = receive().await; // serve until told otherwise
//! }
//!
//! let node = Node::new().unwrap();
//! let ids = node.run(async {
//!     let spec = SupervisorSpec::new(SupervisorFlags::new(Strategy::RestForOne))
//!         .child(ChildSpec::worker("db", worker))
//!         .child(ChildSpec::worker("cache", worker));
//!     let sup = supervisor::start_link(spec, supervisor::StartOptions::new()).await.unwrap();
//!     let children = supervisor::which_children(sup, Duration::from_secs(5)).await.unwrap();
//!     children.into_iter().map(|c| c.id).collect::<Vec<_>>()
//! });
//! assert_eq!(ids.unwrap(), ["db", "cache"]);
//! ```
//!
//! # Differences from OTP
//!
//! - There is no callback module: the [`SupervisorSpec`] is given to `start*` directly.
//! - A supervisor that gives up exits with `Custom("reached_max_restart_intensity")`, which is
//!   abnormal, so a `Transient` parent restarts it (OTP's `{shutdown, ...}` would not be).
//! - A start function returns a pid or an error; there is no `ignore`.
//!
//! [`Exit`]: crate::Exit
//! [`Down`]: crate::Down
//! [`NodeHandle::shutdown`]: crate::NodeHandle::shutdown
//! [`Node::stop`]: crate::Node::stop
//! [`ExitReason::is_abnormal`]: crate::ExitReason::is_abnormal
//! [`ExitReason::Kill`]: crate::ExitReason::Kill
//! [`ExitReason::Shutdown`]: crate::ExitReason::Shutdown
//! [`gen_server`]: crate::gen_server

mod client;
mod error;
mod intensity;
mod server;
mod spec;
mod strategy;
#[cfg(test)]
mod tests;

pub use client::{
    count_children, delete_child, restart_child, stop, terminate_child, which_children,
};
pub use error::{CallError, ChildError, StartChildError, StartError};
pub use intensity::{REACHED_MAX_RESTART_INTENSITY, reached_max_restart_intensity};
pub use server::{start, start_link, start_on};
pub use spec::{
    ChildCounts, ChildInfo, ChildKind, ChildSpec, DEFAULT_INTENSITY, DEFAULT_PERIOD,
    DEFAULT_SHUTDOWN_TIMEOUT, Restart, Shutdown, StartFuture, StartOptions, SupervisorFlags,
    SupervisorSpec,
};
pub use strategy::Strategy;
