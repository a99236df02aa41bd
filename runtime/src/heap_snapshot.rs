//! Heap snapshots of a node, in Chrome DevTools' `.heapsnapshot` format (V8's).
//!
//! Rust has no object graph to dump, so the snapshot is made of what the runtime knows of its
//! processes ([`crate::introspect`]): a synthetic root holds the node, which holds its
//! processes. Each process is an object named after its initial call (so that DevTools'
//! Summary groups processes by what they run), whose self size is its heap account's live
//! bytes (with the counting allocator; 0 without); under it hang its mailbox (the bytes its
//! queued messages' envelopes and queues hold, with their count), its registered name, and
//! its sampled live allocation sites, when given ([`LiveSite`]: each with its bytes and object
//! count). A process's mailbox and sites are part of its live bytes, so its own node keeps the
//! rest: its retained size is its live bytes.
//!
//! Edges:
//!
//! | from | to | type | name |
//! | --- | --- | --- | --- |
//! | root | node | element | 1 |
//! | node | each process no supervisor holds | property | its pid |
//! | node | each supervised process | weak | its pid |
//! | supervisor | each child | property | the child's pid |
//! | process | its mailbox, name, sites | property | `mailbox`, `registered_name`, the site |
//! | mailbox, site | their count (a number) | property | `len`, `objects` |
//! | process | each process it is linked to, monitors | weak | `link`, `monitor` |
//!
//! A supervisor's children are held by it alone, so DevTools' (and memlab's) retained sizes
//! say which supervisor subtree holds memory; links and monitors are weak edges, which
//! retained sizes ignore. Every node is reachable from the root.
//!
//! # Streaming
//!
//! The file is written as a stream in V8's key order (`snapshot` with its `meta` and counts,
//! `nodes`, `edges`, the empty trace and sample arrays, then `strings`), which DevTools'
//! streaming loader needs. The graph is never built: a 40-byte record per process, 8 bytes per
//! link or monitor and three 4-byte indices per process (what is rare, a mailbox holding
//! something or a name, is kept aside) generate the nodes and edges as they are written, once
//! to count the edges and once to write them. A node of 100,000 processes takes about 7 MB
//! beside its 9.5 MB output, never a second copy of it (`benches/heap_snapshot.rs` measures
//! it).
//!
//! The processes are read one at a time, as [`introspect::walk`](crate::introspect::walk)
//! reads them: a snapshot never stops the node, and shows each process as it was when read.
//! Its own allocations are charged to no process.
//!
//! ```
//! use runtime::{Node, heap_snapshot, receive, spawn};
//!
//! let node = Node::new().unwrap();
//! node.run(async {
//!     let worker = spawn(async { let _: String = receive().await; }).unwrap();
//!     runtime::send(worker, [0u64; 8]); // not a `String`: it stays queued
//! }).unwrap();
//! let mut out = Vec::new();
//! let written = heap_snapshot::heap_snapshot(&node, &mut out).unwrap();
//! assert_eq!(written.processes, 1);
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.starts_with(r#"{"snapshot":{"meta":{"node_fields":["type","name","id""#));
//! assert!(text.contains(r#""runtime::Mailbox""#));
//! ```

mod chunked;
mod graph;
mod live;
mod strings;

pub use live::live_sites;

use std::io::{self, Write};

use crate::{NodeHandle, Pid};
use graph::{EDGE_TYPES, Graph, NODE_TYPES};

/// A sampled allocation site that a process still holds (from an allocation profile's live
/// set), to show under that process in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveSite {
    /// The process that owns the allocations.
    pub pid: Pid,
    /// The site: a function, or a stack, as the profile names it.
    pub site: String,
    /// The bytes still live there (estimated from the samples).
    pub bytes: u64,
    /// The blocks still live there (estimated from the samples).
    pub objects: u64,
}

/// What [`HeapSnapshot::write`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotSummary {
    /// The processes in the snapshot.
    pub processes: usize,
    /// Its nodes.
    pub nodes: usize,
    /// Its edges.
    pub edges: usize,
    /// Whether processes have their heap figures (the counting allocator is installed);
    /// without them their self sizes are 0, and only mailboxes and sites have sizes.
    pub heap_figures: bool,
    /// Live sites left out because their process was not found (it ended, or is on another
    /// node).
    pub sites_dropped: usize,
}

/// A heap snapshot of a node, to write: [`heap_snapshot`] with options.
#[derive(Clone, Copy, Debug)]
pub struct HeapSnapshot<'a> {
    node: &'a NodeHandle,
    sites: &'a [LiveSite],
}

impl<'a> HeapSnapshot<'a> {
    /// A snapshot of `node`'s processes.
    pub fn of(node: &'a NodeHandle) -> HeapSnapshot<'a> {
        HeapSnapshot { node, sites: &[] }
    }

    /// With these sampled live allocation sites under their processes.
    pub fn live_sites(self, sites: &'a [LiveSite]) -> HeapSnapshot<'a> {
        HeapSnapshot { sites, ..self }
    }

    /// Reads the node and writes its snapshot to `out` (buffered here: `out` may be a bare
    /// file). Writers are taken as every writing function of the runtime and of tprof takes
    /// them (`tprof::archive::write`, `tprof::export::write`): `out: &mut dyn Write`, last.
    ///
    /// # Errors
    /// What writing to `out` fails with.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<SnapshotSummary> {
        crate::heap::suppressed(|| {
            let graph = Graph::build(self.node, self.sites);
            let mut out = io::BufWriter::with_capacity(1 << 16, out);
            let edges = write_json(&graph, &mut out)?;
            out.flush()?;
            Ok(SnapshotSummary {
                processes: graph.processes(),
                nodes: graph.node_count() as usize,
                edges,
                heap_figures: graph.heap_figures,
                sites_dropped: graph.sites_dropped,
            })
        })
    }
}

/// Writes a heap snapshot of `node` to `out`: [`HeapSnapshot::write`] without live sites. See
/// the [module docs](self).
///
/// # Errors
/// What writing to `out` fails with.
pub fn heap_snapshot(node: &NodeHandle, out: &mut dyn Write) -> io::Result<SnapshotSummary> {
    HeapSnapshot::of(node).write(out)
}

/// V8's node fields, in order.
const NODE_FIELDS: [&str; 7] = [
    "type",
    "name",
    "id",
    "self_size",
    "edge_count",
    "trace_node_id",
    "detachedness",
];

/// Writes `fields` separated by commas (faster than `write!`: a snapshot is millions of
/// numbers).
fn numbers(out: &mut impl Write, fields: &[u64]) -> io::Result<()> {
    let mut buf = [0u8; 20];
    for (i, &n) in fields.iter().enumerate() {
        if i != 0 {
            out.write_all(b",")?;
        }
        out.write_all(strings::decimal(n, &mut buf).as_bytes())?;
    }
    Ok(())
}

/// Writes `graph` as JSON; returns its edge count.
fn write_json(graph: &Graph<'_>, out: &mut impl Write) -> io::Result<usize> {
    let mut edge_count = 0usize;
    graph.for_each_edge(|_| {
        edge_count += 1;
        Ok(())
    })?;
    let list = |items: &[&str]| {
        let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
        format!("[{}]", quoted.join(","))
    };
    writeln!(
        out,
        "{{\"snapshot\":{{\"meta\":{{\"node_fields\":{},\"node_types\":[{},\"string\",\"number\",\
         \"number\",\"number\",\"number\",\"number\"],\"edge_fields\":[\"type\",\
         \"name_or_index\",\"to_node\"],\"edge_types\":[{},\"string_or_number\",\"node\"],\
         \"trace_function_info_fields\":[\"function_id\",\"name\",\"script_name\",\"script_id\",\
         \"line\",\"column\"],\"trace_node_fields\":[\"id\",\"function_info_index\",\"count\",\
         \"size\",\"children\"],\"sample_fields\":[\"timestamp_us\",\"last_assigned_id\"],\
         \"location_fields\":[\"object_index\",\"script_id\",\"line\",\"column\"]}},\
         \"node_count\":{},\"edge_count\":{edge_count},\"trace_function_count\":0}},",
        list(&NODE_FIELDS),
        list(&NODE_TYPES),
        list(&EDGE_TYPES),
        graph.node_count(),
    )?;
    out.write_all(b"\"nodes\":[")?;
    let mut index = 0u64;
    graph.for_each_node(|n| {
        if index != 0 {
            out.write_all(b",\n")?;
        }
        // Ids are odd, as V8's object ids are.
        let id = 2 * index + 1;
        index += 1;
        let fields = [
            n.kind.into(),
            n.name.into(),
            id,
            n.self_size,
            n.edges.into(),
            0,
            0,
        ];
        numbers(out, &fields)
    })?;
    out.write_all(b"],\n\"edges\":[")?;
    let mut first = true;
    graph.for_each_edge(|e| {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        let to = u64::from(e.to) * NODE_FIELDS.len() as u64;
        numbers(out, &[e.kind.into(), e.name.into(), to])
    })?;
    out.write_all(
        b"],\n\"trace_function_infos\":[],\n\"trace_tree\":[],\n\"samples\":[],\n\
          \"locations\":[],\n\"strings\":[",
    )?;
    let mut first = true;
    graph.for_each_string(|s| {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, s).map_err(io::Error::from)
    })?;
    out.write_all(b"]}\n")?;
    Ok(edge_count)
}
