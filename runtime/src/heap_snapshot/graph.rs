//! The snapshot's graph, kept compact: one small record per process (what the walk read),
//! from which its nodes and edges are generated, in order, as often as the writer needs them
//! (once to count the edges, once to write the nodes, once to write the edges). No node or
//! edge is ever stored, and no text but the strings that are not pids (pids' strings are
//! formatted as they are written). Growing lists are [`Chunked`]: no doubling, no peak.

use super::LiveSite;
use super::chunked::Chunked;
use super::strings::{
    EMPTY, LEN, LINK, MAILBOX, MAILBOX_TYPE, MONITOR, OBJECTS, REGISTERED_NAME, Strings,
};
use crate::introspect::ProcessView;
use crate::{NodeHandle, Pid};

/// No string, no process.
const NONE: u32 = u32::MAX;

/// V8's node types (`meta.node_types[0]`), by index.
pub(super) const NODE_TYPES: [&str; 14] = [
    "hidden",
    "array",
    "string",
    "object",
    "code",
    "closure",
    "regexp",
    "number",
    "native",
    "synthetic",
    "concatenated string",
    "sliced string",
    "symbol",
    "bigint",
];
const STRING: u8 = 2;
const OBJECT: u8 = 3;
const NUMBER: u8 = 7;
const NATIVE: u8 = 8;
const SYNTHETIC: u8 = 9;

/// V8's edge types (`meta.edge_types[0]`), by index.
pub(super) const EDGE_TYPES: [&str; 7] = [
    "context", "element", "property", "internal", "hidden", "shortcut", "weak",
];
const ELEMENT: u8 = 1;
const PROPERTY: u8 = 2;
const WEAK: u8 = 6;

/// One node of the snapshot, as written.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    pub(super) kind: u8,
    pub(super) name: u32,
    pub(super) self_size: u64,
    pub(super) edges: u32,
}

/// One edge, as written: `name` is a string id, or an index for an element edge.
#[derive(Clone, Copy, Debug)]
pub(super) struct Edge {
    pub(super) kind: u8,
    pub(super) name: u32,
    /// The index of the node it points to (written as its offset, `to * fields`).
    pub(super) to: u32,
}

/// A pid of the snapshot's node: its index and serial (its node is the snapshot's).
type Key = u64;

fn key(pid: Pid) -> Key {
    u64::from(pid.index()) << 32 | u64::from(pid.serial())
}

/// `Proc::flags`: it is a supervisor.
const SUPERVISOR: u8 = 1;
/// It has a parent on this node (`Proc::parent`).
const HAS_PARENT: u8 = 2;
/// Its parent is a supervisor the walk read: that supervisor holds it, not the node.
const SUPERVISED: u8 = 4;
/// Its mailbox holds something (see `Graph::mailboxes`).
const MAILBOX_NODE: u8 = 8;
/// It has a registered name (see `Graph::names`).
const NAME_NODE: u8 = 16;

/// What the walk read of one process: 40 bytes (what is rare — a mailbox holding something,
/// a name — is kept aside, by process).
struct Proc {
    pid: Key,
    parent: Key,
    live: u64,
    /// The string of its initial call.
    call: u32,
    /// Where its links end in `ties` (they start where the previous process's monitors end).
    links_end: u32,
    monitors_end: u32,
    flags: u8,
}

/// The graph of one node's processes, ready to be written.
pub(super) struct Graph<'a> {
    node_id: u32,
    /// The node's own name string.
    node_name: u32,
    procs: Chunked<Proc>,
    /// Every process's links, then its monitors (those on this node).
    ties: Chunked<Key>,
    /// `slots[pid.index()]`: the process read from that slot.
    slots: Vec<u32>,
    /// The processes whose mailbox holds something: (process, its message count's string,
    /// its bytes), by process.
    mailboxes: Vec<(u32, u32, u64)>,
    /// The processes with a name: (process, its string), by process.
    names: Vec<(u32, u32)>,
    /// The supervisors, by process, and where each one's children start in `children`
    /// (`children_start[k]..children_start[k + 1]` for supervisor `k`).
    supervisors: Vec<u32>,
    children_start: Vec<u32>,
    children: Vec<u32>,
    /// The live sites placed: (process, index in `sites`), by process; and each site's name's
    /// and object count's strings.
    sites: &'a [LiveSite],
    placed: Vec<(u32, u32)>,
    site_strings: Vec<(u32, u32)>,
    /// The index of each process's node.
    first_node: Vec<u32>,
    node_count: u32,
    strings: Strings,
    /// Whether the heap figures were there (the counting allocator is installed).
    pub(super) heap_figures: bool,
    /// Sites of processes the walk did not see (ended since, or never on this node).
    pub(super) sites_dropped: usize,
}

impl<'a> Graph<'a> {
    /// Walks `node` and lays out its snapshot.
    pub(super) fn build(node: &NodeHandle, sites: &'a [LiveSite]) -> Graph<'a> {
        let node_id = node.id();
        let mut strings = Strings::new();
        let node_name = strings.intern(&format!("runtime::Node {node_id}"));
        let mut procs = Chunked::new();
        let mut ties = Chunked::new();
        let mut mailboxes = Vec::new();
        let mut names = Vec::new();
        let mut supervisors = Vec::new();
        let mut heap_figures = crate::heap::installed();
        crate::introspect::walk(node, |p: &ProcessView<'_>| {
            let i = procs.len() as u32;
            let here = |pid: &&Pid| pid.node() == node_id;
            for t in p.links.iter().filter(here) {
                ties.push(key(*t));
            }
            let links_end = ties.len() as u32;
            for t in p.monitors.iter().filter(here) {
                ties.push(key(*t));
            }
            let mut flags = 0;
            if p.message_queue_len > 0 || p.mailbox_bytes > 0 {
                flags |= MAILBOX_NODE;
                let len = strings.number(p.message_queue_len as u64);
                mailboxes.push((i, len, p.mailbox_bytes));
            }
            if let Some(name) = p.registered_name {
                flags |= NAME_NODE;
                names.push((i, strings.name(name)));
            }
            if p.is_supervisor {
                flags |= SUPERVISOR;
                supervisors.push(i);
            }
            let parent = p.parent.filter(|parent| parent.node() == node_id);
            if parent.is_some() {
                flags |= HAS_PARENT;
            }
            heap_figures &= p.heap.is_some();
            procs.push(Proc {
                pid: key(p.pid),
                parent: parent.map_or(0, key),
                live: p.heap.map_or(0, |h| h.live_bytes),
                call: strings.intern(p.initial_call),
                links_end,
                monitors_end: ties.len() as u32,
                flags,
            });
        });
        let mut graph = Graph {
            node_id,
            node_name,
            procs,
            ties,
            slots: Vec::new(),
            mailboxes,
            names,
            supervisors,
            children_start: Vec::new(),
            children: Vec::new(),
            sites,
            placed: Vec::new(),
            site_strings: Vec::new(),
            first_node: Vec::new(),
            node_count: 0,
            strings,
            heap_figures,
            sites_dropped: 0,
        };
        graph.index_slots();
        graph.link_supervisors();
        graph.place_sites();
        graph.lay_out();
        graph
    }

    fn index_slots(&mut self) {
        let high = self
            .procs
            .iter()
            .map(|p| (p.pid >> 32) + 1)
            .max()
            .unwrap_or(0);
        self.slots = vec![NONE; high as usize];
        for (i, p) in self.procs.iter().enumerate() {
            self.slots[(p.pid >> 32) as usize] = i as u32;
        }
    }

    /// The index of the process of `key`, if the walk read it.
    fn find(&self, key: Key) -> Option<u32> {
        let i = *self.slots.get((key >> 32) as usize)?;
        (i != NONE && self.procs.get(i as usize).pid == key).then_some(i)
    }

    /// The index of `pid`'s process, if the walk read it.
    fn find_pid(&self, pid: Pid) -> Option<u32> {
        (pid.node() == self.node_id)
            .then(|| self.find(key(pid)))
            .flatten()
    }

    /// The supervisor (its index in `supervisors`) that holds process `i`, if any.
    fn supervisor_of(&self, i: usize) -> Option<u32> {
        let p = self.procs.get(i);
        if p.flags & HAS_PARENT == 0 {
            return None;
        }
        let parent = self.find(p.parent)?;
        self.supervisors
            .binary_search(&parent)
            .ok()
            .map(|k| k as u32)
    }

    /// Each supervisor's children, by a counting sort.
    fn link_supervisors(&mut self) {
        let keys = (0..self.procs.len()).map(|i| self.supervisor_of(i).unwrap_or(NONE));
        let (start, order) = group(self.supervisors.len(), keys);
        for &c in &order {
            self.procs.get_mut(c as usize).flags |= SUPERVISED;
        }
        self.children_start = start;
        self.children = order;
    }

    /// Each live site under its process (sites of processes not read are dropped).
    fn place_sites(&mut self) {
        let sites = self.sites;
        let mut placed = Vec::new();
        self.site_strings = Vec::with_capacity(sites.len());
        for (s, site) in sites.iter().enumerate() {
            match self.find_pid(site.pid) {
                Some(owner) => {
                    placed.push((owner, s as u32));
                    let strings = (
                        self.strings.intern(&site.site),
                        self.strings.number(site.objects),
                    );
                    self.site_strings.push(strings);
                }
                None => {
                    self.sites_dropped += 1;
                    self.site_strings.push((NONE, NONE));
                }
            }
        }
        placed.sort_unstable();
        self.placed = placed;
    }

    /// Each process's first node: the root is node 0, the node 1, then each process followed
    /// by its mailbox (and its length), its name and its sites (each with its object count).
    fn lay_out(&mut self) {
        let mut next = 2u32;
        let mut first_node = Vec::with_capacity(self.procs.len());
        for (i, p) in self.procs.iter().enumerate() {
            first_node.push(next);
            let sites = self.sites_of(i).len() as u32;
            next += 1
                + 2 * u32::from(p.flags & MAILBOX_NODE != 0)
                + u32::from(p.flags & NAME_NODE != 0)
                + 2 * sites;
        }
        self.first_node = first_node;
        self.node_count = next;
    }

    pub(super) fn node_count(&self) -> u32 {
        self.node_count
    }

    pub(super) fn processes(&self) -> usize {
        self.procs.len()
    }

    /// The strings, in id order: the interned ones, then one pid per process.
    pub(super) fn for_each_string(
        &self,
        mut f: impl FnMut(&str) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        for s in self.strings.iter() {
            f(s)?;
        }
        let mut buf = String::new();
        for p in self.procs.iter() {
            use std::fmt::Write as _;
            buf.clear();
            let pid = Pid::from_parts(self.node_id, (p.pid >> 32) as u32, p.pid as u32);
            let _ = write!(buf, "{pid}");
            f(&buf)?;
        }
        Ok(())
    }

    /// The string of process `i`'s pid.
    fn pid_string(&self, i: u32) -> u32 {
        self.strings.len() + i
    }

    /// Where process `i`'s links start, where they end and its monitors start, and where
    /// those end, in `ties`.
    fn ties(&self, i: usize) -> [usize; 3] {
        let start = match i {
            0 => 0,
            _ => self.procs.get(i - 1).monitors_end,
        };
        let p = self.procs.get(i);
        [start, p.links_end, p.monitors_end].map(|at| at as usize)
    }

    /// Process `i`'s mailbox: its message count's string and its bytes.
    fn mailbox(&self, i: usize) -> Option<(u32, u64)> {
        if self.procs.get(i).flags & MAILBOX_NODE == 0 {
            return None;
        }
        let at = self.mailboxes.partition_point(|m| (m.0 as usize) < i);
        self.mailboxes.get(at).map(|m| (m.1, m.2))
    }

    /// Process `i`'s name's string.
    fn name(&self, i: usize) -> Option<u32> {
        if self.procs.get(i).flags & NAME_NODE == 0 {
            return None;
        }
        let at = self.names.partition_point(|n| (n.0 as usize) < i);
        self.names.get(at).map(|n| n.1)
    }

    /// The processes supervisor `i` holds.
    fn children(&self, i: usize) -> &[u32] {
        if self.procs.get(i).flags & SUPERVISOR == 0 {
            return &[];
        }
        match self.supervisors.binary_search(&(i as u32)) {
            Ok(k) => {
                &self.children[self.children_start[k] as usize..self.children_start[k + 1] as usize]
            }
            Err(_) => &[],
        }
    }

    /// Process `i`'s live sites, as (process, site) pairs.
    fn sites_of(&self, i: usize) -> &[(u32, u32)] {
        let i = i as u32;
        let start = self.placed.partition_point(|p| p.0 < i);
        let end = start + self.placed[start..].partition_point(|p| p.0 == i);
        &self.placed[start..end]
    }

    /// Every node, in order.
    pub(super) fn for_each_node(
        &self,
        mut f: impl FnMut(Node) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        f(Node {
            kind: SYNTHETIC,
            name: EMPTY,
            self_size: 0,
            edges: 1,
        })?;
        f(Node {
            kind: SYNTHETIC,
            name: self.node_name,
            self_size: 0,
            edges: self.procs.len() as u32,
        })?;
        for (i, p) in self.procs.iter().enumerate() {
            let mut edges = 0;
            self.process_edges(i, |_| {
                edges += 1;
                Ok(())
            })?;
            let sites = self.sites_of(i);
            let site_bytes: u64 = sites
                .iter()
                .map(|&(_, s)| self.sites[s as usize].bytes)
                .sum();
            let mailbox = self.mailbox(i);
            f(Node {
                kind: OBJECT,
                name: p.call,
                // What its mailbox and sites hold is theirs: the process retains its live
                // bytes in all.
                self_size: p
                    .live
                    .saturating_sub(mailbox.map_or(0, |m| m.1) + site_bytes),
                edges,
            })?;
            if let Some((len, bytes)) = mailbox {
                f(Node {
                    kind: OBJECT,
                    name: MAILBOX_TYPE,
                    self_size: bytes,
                    edges: 1,
                })?;
                f(Node {
                    kind: NUMBER,
                    name: len,
                    self_size: 0,
                    edges: 0,
                })?;
            }
            if let Some(name) = self.name(i) {
                f(Node {
                    kind: STRING,
                    name,
                    self_size: 0,
                    edges: 0,
                })?;
            }
            for &(_, s) in sites {
                let (name, objects) = self.site_strings[s as usize];
                f(Node {
                    kind: NATIVE,
                    name,
                    self_size: self.sites[s as usize].bytes,
                    edges: 1,
                })?;
                f(Node {
                    kind: NUMBER,
                    name: objects,
                    self_size: 0,
                    edges: 0,
                })?;
            }
        }
        Ok(())
    }

    /// Every edge, in the order of the nodes they leave.
    pub(super) fn for_each_edge(
        &self,
        mut f: impl FnMut(Edge) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        f(Edge {
            kind: ELEMENT,
            name: 1,
            to: 1,
        })?;
        // The node holds the processes no supervisor holds; it reaches the others weakly, so
        // that a supervisor retains its subtree.
        for (i, p) in self.procs.iter().enumerate() {
            f(Edge {
                kind: if p.flags & SUPERVISED == 0 {
                    PROPERTY
                } else {
                    WEAK
                },
                name: self.pid_string(i as u32),
                to: self.first_node[i],
            })?;
        }
        for i in 0..self.procs.len() {
            self.process_edges(i, &mut f)?;
            let mut next = self.first_node[i] + 1;
            if self.mailbox(i).is_some() {
                f(Edge {
                    kind: PROPERTY,
                    name: LEN,
                    to: next + 1,
                })?;
                next += 2;
            }
            if self.name(i).is_some() {
                next += 1;
            }
            for _ in self.sites_of(i) {
                f(Edge {
                    kind: PROPERTY,
                    name: OBJECTS,
                    to: next + 1,
                })?;
                next += 2;
            }
        }
        Ok(())
    }

    /// The edges leaving process `i`'s own node.
    fn process_edges(
        &self,
        i: usize,
        mut f: impl FnMut(Edge) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut next = self.first_node[i] + 1;
        if self.mailbox(i).is_some() {
            f(Edge {
                kind: PROPERTY,
                name: MAILBOX,
                to: next,
            })?;
            next += 2;
        }
        if self.name(i).is_some() {
            f(Edge {
                kind: PROPERTY,
                name: REGISTERED_NAME,
                to: next,
            })?;
            next += 1;
        }
        for &(_, s) in self.sites_of(i) {
            f(Edge {
                kind: PROPERTY,
                name: self.site_strings[s as usize].0,
                to: next,
            })?;
            next += 2;
        }
        for &c in self.children(i) {
            f(Edge {
                kind: PROPERTY,
                name: self.pid_string(c),
                to: self.first_node[c as usize],
            })?;
        }
        let [links, monitors, end] = self.ties(i);
        for (start, end, name) in [(links, monitors, LINK), (monitors, end, MONITOR)] {
            for &t in self.ties.range(start, end) {
                if let Some(t) = self.find(t) {
                    f(Edge {
                        kind: WEAK,
                        name,
                        to: self.first_node[t as usize],
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// Groups the items `0..` by the key each has (`NONE`: in no group), keys in `0..groups`:
/// `order[start[k]..start[k + 1]]` are group `k`'s items, in order (a counting sort).
fn group(groups: usize, keys: impl Iterator<Item = u32> + Clone) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; groups + 1];
    for k in keys.clone().filter(|&k| k != NONE) {
        start[k as usize + 1] += 1;
    }
    for k in 0..groups {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut order = vec![0u32; start[groups] as usize];
    for (item, k) in keys.enumerate().filter(|&(_, k)| k != NONE) {
        order[fill[k as usize] as usize] = item as u32;
        fill[k as usize] += 1;
    }
    (start, order)
}

#[cfg(test)]
mod tests {
    use super::{NONE, group};

    #[test]
    fn items_are_grouped_by_key_in_order() {
        let keys = [2, NONE, 0, 2, 0];
        let (start, order) = group(3, keys.into_iter());
        assert_eq!(start, [0, 2, 2, 4]);
        assert_eq!(order, [2, 4, 0, 3]);
    }
}
