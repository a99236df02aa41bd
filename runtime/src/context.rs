//! Layer 2, the thread's context: which process (and owner of allocations) runs on this
//! thread and which node the thread belongs to, the one thing the layers below the process
//! layer need from the process world. Heap accounting and tracing read it here; the process
//! layer ([`crate::world`]) writes it as each poll begins and ends.
//!
//! May use the plain data below it only.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, Ordering};

/// This thread's current process: plain cells (no destructor, no borrow flag), so reading it
/// is a load from the thread's TLS block.
pub(crate) struct Current {
    /// The process layer's `Arc` of the innermost `enter` on this thread (an
    /// `Arc<Process>`, opaque here: only the process layer's `current` module stores or reads
    /// it as one), or null outside any process. An atomic (relaxed: a plain load or store)
    /// because the CPU sampler's signal handler reads it on this thread.
    pub(crate) process: AtomicPtr<()>,
    /// Whether the current process runs as a helper task of its own.
    pub(crate) helper: Cell<bool>,
    /// The current process's node; outside any process, [`OUTSIDE`] with the node the thread
    /// belongs to (0 for none); 0 while the trace machinery looks away (`with_node_hidden`).
    /// Read by the trace machinery on every traced call.
    pub(crate) node: Cell<u32>,
}

thread_local! {
    pub(crate) static CURRENT: Current = const {
        Current {
            process: AtomicPtr::new(std::ptr::null_mut()),
            helper: Cell::new(false),
            node: Cell::new(OUTSIDE),
        }
    };
}

/// [`current_node_id`]'s bit for a thread outside any process.
pub(crate) const OUTSIDE: u32 = 1 << 31;

/// The node of this thread's current process; outside any process, [`OUTSIDE`] with the node
/// this thread belongs to (0 when none: `main`, a thread of a runtime no node owns); 0 inside
/// [`with_node_hidden`].
#[inline(always)]
pub(crate) fn current_node_id() -> u32 {
    CURRENT.with(|c| c.node.get())
}

/// Makes this thread belong to `node` (a thread of the node's runtime, as it starts).
pub(crate) fn set_thread_node(node: u32) {
    CURRENT.with(|c| {
        if c.process.load(Ordering::Relaxed).is_null() {
            c.node.set(OUTSIDE | node);
        }
    });
}

/// This thread belongs to a node until dropped (while [`Node::block_on`](crate::Node::block_on)
/// runs a future on it), then to the one it belonged to before.
pub(crate) struct ThreadNode(Option<u32>);

impl ThreadNode {
    /// Makes this thread belong to `node`, if it runs no process (`block_on` cannot be called
    /// from one: it is an async context).
    pub(crate) fn set(node: u32) -> ThreadNode {
        ThreadNode(CURRENT.with(|c| {
            let prev = c.node.get();
            (c.process.load(Ordering::Relaxed).is_null() && prev & OUTSIDE != 0)
                .then(|| c.node.replace(OUTSIDE | node))
        }))
    }
}

impl Drop for ThreadNode {
    fn drop(&mut self) {
        if let Some(prev) = self.0 {
            CURRENT.with(|c| c.node.set(prev));
        }
    }
}

/// Runs `f` as if outside any node for the trace machinery (its calls are counted by no
/// session), restoring the node afterwards, on unwind too.
pub(crate) fn with_node_hidden<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.node.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.node.replace(0)));
    f()
}

/// Whether the caller is a helper task of its current process (`Some(true)`), the process
/// itself (`Some(false)`), or outside any process (`None`).
#[inline]
pub(crate) fn current_is_helper() -> Option<bool> {
    CURRENT.with(|c| (!c.process.load(Ordering::Relaxed).is_null()).then(|| c.helper.get()))
}
