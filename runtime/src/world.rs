//! Layer 5, processes and nodes: the process record and table, spawning and the poll wrapper,
//! mailboxes, links, monitors and exit signals, timers, registered names, sending, and the
//! node that owns them.
//!
//! May use the layers below (plain data, the thread's context, heap accounting, tracing);
//! never the observers or the behaviours above, which it reaches only through the hooks those
//! register in the lower layers (see the crate's docs, "Layers").

pub(crate) mod mailbox;
pub(crate) mod node;
pub(crate) mod observe;
pub(crate) mod process;
pub(crate) mod registry;
pub(crate) mod send;
pub(crate) mod signal;
pub(crate) mod timer;
#[cfg(test)]
mod trace_tests;
