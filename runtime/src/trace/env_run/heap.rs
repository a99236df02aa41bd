//! Heap snapshots of a profiled node ([`ENV_HEAP_SNAPSHOT`](super::ENV_HEAP_SNAPSHOT)): written
//! into the run folder as the node starts to stop (its processes still alive) and as SIGINT or
//! SIGTERM arrives, as `tprof-heap-<os pid>-node<node>.heapsnapshot`.

use std::path::Path;

use crate::NodeHandle;

/// The name of the heap snapshot of node `node` of OS process `os_pid` in the run folder.
pub fn heap_snapshot_file(os_pid: u32, node: u32) -> String {
    format!("tprof-heap-{os_pid}-node{node}.heapsnapshot")
}

/// The node of a heap snapshot file of OS process `os_pid` in the run folder, if `name` is one.
pub fn heap_snapshot_node(name: &str, os_pid: u32) -> Option<u32> {
    name.strip_prefix(&format!("tprof-heap-{os_pid}-node"))?
        .strip_suffix(".heapsnapshot")?
        .parse()
        .ok()
}

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

#[cfg(test)]
mod tests {
    use super::{heap_snapshot_file, heap_snapshot_node};

    #[test]
    fn a_heap_snapshot_file_names_its_node() {
        let name = heap_snapshot_file(42, 7);
        assert_eq!(heap_snapshot_node(&name, 42), Some(7));
        assert_eq!(heap_snapshot_node(&name, 43), None);
        assert_eq!(heap_snapshot_node("tprof-run-42-node7.json", 42), None);
    }
}
