//! Heap snapshots of a profiled node ([`ENV_HEAP_SNAPSHOT`](super::ENV_HEAP_SNAPSHOT)): written
//! into the run folder as the node starts to stop (its processes still alive) and as SIGINT or
//! SIGTERM arrives, as `tprof-heap-<os pid>-node<node>.heapsnapshot`.

use std::path::Path;

use crate::NodeHandle;
use crate::trace::env_run::heap_snapshot_file;

/// Writes `node`'s heap snapshot into `dir`, with `sites` (what allocation sampling says is
/// still live) under their processes, whole or not at all (errors go to stderr).
pub(super) fn write(dir: &Path, node: &NodeHandle, sites: &[crate::heap_snapshot::LiveSite]) {
    let name = heap_snapshot_file(std::process::id(), node.id());
    let path = dir.join(&name);
    let partial = dir.join(format!(".{name}.partial"));
    let written = std::fs::File::create(&partial)
        .and_then(|mut f| {
            crate::heap_snapshot::HeapSnapshot::of(node)
                .live_sites(sites)
                .write(&mut f)
        })
        .and_then(|_| std::fs::rename(&partial, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        eprintln!(
            "tprof: cannot write the heap snapshot of node {} to {}: {e}",
            node.id(),
            path.display()
        );
    }
}
