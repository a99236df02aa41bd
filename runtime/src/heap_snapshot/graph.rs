//! The snapshot's graph, kept compact: one small record per process (what the walk read),
//! from which its nodes and edges are generated, in order, as often as the writer needs them
//! (once to count the edges, once to write the nodes, once to write the edges). No node or
//! edge is ever stored, and no text but the strings that are not pids (pids' strings are
//! formatted as they are written).

use rustc_hash::FxHashMap;

use super::LiveSite;
use crate::introspect::ProcessView;
use crate::registry::Name;
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

/// The strings every snapshot has, by id.
const EMPTY: u32 = 0;
const MAILBOX: u32 = 1;
const MAILBOX_TYPE: u32 = 2;
const LEN: u32 = 3;
const REGISTERED_NAME: u32 = 4;
const LINK: u32 = 5;
const MONITOR: u32 = 6;
const OBJECTS: u32 = 7;
const FIXED: [&str; 8] = [
    "",
    "mailbox",
    "runtime::Mailbox",
    "len",
    "registered_name",
    "link",
    "monitor",
    "objects",
];

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

/// A string of the snapshot.
enum Text {
    Static(&'static str),
    Shared(Name),
    Owned(Box<str>),
}

impl Text {
    fn as_str(&self) -> &str {
        match self {
            Text::Static(s) => s,
            Text::Shared(s) => s,
            Text::Owned(s) => s,
        }
    }
}

/// What the walk read of one process.
struct Proc {
    pid: Pid,
    parent: Option<Pid>,
    /// The string of its initial call.
    call: u32,
    /// The string of its registered name, or `NONE`.
    name: u32,
    /// The string of its message count, or `NONE` when its mailbox holds nothing.
    queue_len: u32,
    queue_bytes: u64,
    live: u64,
    is_supervisor: bool,
    /// Where its links end in `ties` (they start where the previous process's monitors end).
    links_end: u32,
    monitors_end: u32,
}

/// The strings of a snapshot: interned, but for registered names and pids (one each per
/// process, rarely shared: a name is kept as the registry's own `Arc`, and a pid is formatted
/// as it is written, after the others).
struct Strings {
    list: Vec<Text>,
    index: FxHashMap<Box<str>, u32>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings {
            list: Vec::new(),
            index: FxHashMap::default(),
        };
        for f in FIXED {
            s.list.push(Text::Static(f));
            s.index.insert(f.into(), s.list.len() as u32 - 1);
        }
        s
    }

    fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(Text::Owned(text.into()));
        self.index.insert(text.into(), id);
        id
    }

    fn number(&mut self, n: u64) -> u32 {
        let mut buf = [0u8; 20];
        let text = decimal(n, &mut buf);
        self.intern(text)
    }

    fn push(&mut self, text: Text) -> u32 {
        self.list.push(text);
        self.list.len() as u32 - 1
    }
}

/// `n` in decimal, in `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
}

/// The graph of one node's processes, ready to be written.
pub(super) struct Graph<'a> {
    node_id: u32,
    /// The node's own name string.
    node_name: u32,
    procs: Vec<Proc>,
    /// Every process's links, then its monitors.
    ties: Vec<Pid>,
    /// `slots[pid.index()]`: the process read from that slot.
    slots: Vec<u32>,
    /// The process index of each process's supervisor, when that supervisor was read too
    /// (`NONE`: the node holds it).
    supervisor: Vec<u32>,
    /// `children[child_start[i]..child_start[i + 1]]`: supervisor `i`'s children.
    child_start: Vec<u32>,
    children: Vec<u32>,
    /// `site_order[site_start[i]..site_start[i + 1]]`: the live sites of process `i`, as
    /// indices into `sites`, with their name's and their object count's strings.
    sites: &'a [LiveSite],
    site_start: Vec<u32>,
    site_order: Vec<u32>,
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
        let mut strings = Strings::new();
        let node_name = strings.intern(&format!("runtime::Node {}", node.id()));
        let mut procs = Vec::with_capacity(node.inner.table.len());
        let mut ties = Vec::new();
        let mut heap_figures = crate::heap::installed();
        crate::introspect::walk(node, |p: &ProcessView<'_>| {
            ties.extend_from_slice(p.links);
            let links_end = ties.len() as u32;
            ties.extend_from_slice(p.monitors);
            let queued = p.message_queue_len > 0 || p.mailbox_bytes > 0;
            heap_figures &= p.heap.is_some();
            procs.push(Proc {
                pid: p.pid,
                parent: p.parent,
                call: strings.intern(p.initial_call),
                name: p
                    .registered_name
                    .map_or(NONE, |n| strings.push(Text::Shared(n.clone()))),
                queue_len: if queued {
                    strings.number(p.message_queue_len as u64)
                } else {
                    NONE
                },
                queue_bytes: p.mailbox_bytes,
                live: p.heap.map_or(0, |h| h.live_bytes),
                is_supervisor: p.is_supervisor,
                links_end,
                monitors_end: ties.len() as u32,
            });
        });
        let mut graph = Graph {
            node_id: node.id(),
            node_name,
            procs,
            ties,
            slots: Vec::new(),
            supervisor: Vec::new(),
            child_start: Vec::new(),
            children: Vec::new(),
            sites,
            site_start: Vec::new(),
            site_order: Vec::new(),
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
            .map(|p| p.pid.index() + 1)
            .max()
            .unwrap_or(0);
        self.slots = vec![NONE; high as usize];
        for (i, p) in self.procs.iter().enumerate() {
            self.slots[p.pid.index() as usize] = i as u32;
        }
    }

    /// The index of process `pid`, if the walk read it.
    fn find(&self, pid: Pid) -> Option<u32> {
        if pid.node() != self.node_id {
            return None;
        }
        let i = *self.slots.get(pid.index() as usize)?;
        (i != NONE && self.procs[i as usize].pid == pid).then_some(i)
    }

    /// Each process's supervisor, and each supervisor's children (by a counting sort).
    fn link_supervisors(&mut self) {
        let supervisor: Vec<u32> = (0..self.procs.len())
            .map(|i| {
                self.procs[i]
                    .parent
                    .and_then(|parent| self.find(parent))
                    .filter(|&s| self.procs[s as usize].is_supervisor)
                    .unwrap_or(NONE)
            })
            .collect();
        let (start, order) = group(self.procs.len(), supervisor.iter().copied());
        self.supervisor = supervisor;
        self.child_start = start;
        self.children = order;
    }

    /// Each live site under its process (sites of processes not read are dropped).
    fn place_sites(&mut self) {
        let owner: Vec<u32> = self
            .sites
            .iter()
            .map(|s| self.find(s.pid).unwrap_or(NONE))
            .collect();
        self.sites_dropped = owner.iter().filter(|&&o| o == NONE).count();
        let sites = self.sites;
        self.site_strings = sites
            .iter()
            .zip(&owner)
            .map(|(s, &o)| match o {
                NONE => (NONE, NONE),
                _ => (self.strings.intern(&s.site), self.strings.number(s.objects)),
            })
            .collect();
        let (start, order) = group(self.procs.len(), owner.into_iter());
        self.site_start = start;
        self.site_order = order;
    }

    /// Each process's first node: the root is node 0, the node 1, then each process followed
    /// by its mailbox (and its length), its name and its sites (each with its object count).
    fn lay_out(&mut self) {
        let mut next = 2u32;
        self.first_node = Vec::with_capacity(self.procs.len());
        for (i, p) in self.procs.iter().enumerate() {
            self.first_node.push(next);
            let sites = self.site_start[i + 1] - self.site_start[i];
            next += 1 + 2 * u32::from(p.queue_len != NONE) + u32::from(p.name != NONE) + 2 * sites;
        }
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
        for s in &self.strings.list {
            f(s.as_str())?;
        }
        let mut buf = String::new();
        for p in &self.procs {
            use std::fmt::Write as _;
            buf.clear();
            let _ = write!(buf, "{}", p.pid);
            f(&buf)?;
        }
        Ok(())
    }

    /// The string of process `i`'s pid.
    fn pid_string(&self, i: u32) -> u32 {
        self.strings.list.len() as u32 + i
    }

    fn links(&self, i: usize) -> &[Pid] {
        let start = if i == 0 {
            0
        } else {
            self.procs[i - 1].monitors_end
        };
        &self.ties[start as usize..self.procs[i].links_end as usize]
    }

    fn monitors(&self, i: usize) -> &[Pid] {
        let p = &self.procs[i];
        &self.ties[p.links_end as usize..p.monitors_end as usize]
    }

    fn children(&self, i: usize) -> &[u32] {
        &self.children[self.child_start[i] as usize..self.child_start[i + 1] as usize]
    }

    fn sites_of(&self, i: usize) -> &[u32] {
        &self.site_order[self.site_start[i] as usize..self.site_start[i + 1] as usize]
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
            let site_bytes: u64 = sites.iter().map(|&s| self.sites[s as usize].bytes).sum();
            f(Node {
                kind: OBJECT,
                name: p.call,
                // What its mailbox and sites hold is theirs: the process retains its live
                // bytes in all.
                self_size: p.live.saturating_sub(p.queue_bytes + site_bytes),
                edges,
            })?;
            if p.queue_len != NONE {
                f(Node {
                    kind: OBJECT,
                    name: MAILBOX_TYPE,
                    self_size: p.queue_bytes,
                    edges: 1,
                })?;
                f(Node {
                    kind: NUMBER,
                    name: p.queue_len,
                    self_size: 0,
                    edges: 0,
                })?;
            }
            if p.name != NONE {
                f(Node {
                    kind: STRING,
                    name: p.name,
                    self_size: 0,
                    edges: 0,
                })?;
            }
            for &s in sites {
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
        for i in 0..self.procs.len() {
            f(Edge {
                kind: if self.supervisor[i] == NONE {
                    PROPERTY
                } else {
                    WEAK
                },
                name: self.pid_string(i as u32),
                to: self.first_node[i],
            })?;
        }
        for (i, p) in self.procs.iter().enumerate() {
            self.process_edges(i, &mut f)?;
            let first = self.first_node[i];
            let mut next = first + 1;
            if p.queue_len != NONE {
                f(Edge {
                    kind: PROPERTY,
                    name: LEN,
                    to: next + 1,
                })?;
                next += 2;
            }
            if p.name != NONE {
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
        let p = &self.procs[i];
        let mut next = self.first_node[i] + 1;
        if p.queue_len != NONE {
            f(Edge {
                kind: PROPERTY,
                name: MAILBOX,
                to: next,
            })?;
            next += 2;
        }
        if p.name != NONE {
            f(Edge {
                kind: PROPERTY,
                name: REGISTERED_NAME,
                to: next,
            })?;
            next += 1;
        }
        for &s in self.sites_of(i) {
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
        for (ties, name) in [(self.links(i), LINK), (self.monitors(i), MONITOR)] {
            for &t in ties {
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
    use super::{NONE, decimal, group};

    #[test]
    fn items_are_grouped_by_key_in_order() {
        let keys = [2, NONE, 0, 2, 0];
        let (start, order) = group(3, keys.into_iter());
        assert_eq!(start, [0, 2, 2, 4]);
        assert_eq!(order, [2, 4, 0, 3]);
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut buf = [0; 20];
        assert_eq!(decimal(0, &mut buf), "0");
        assert_eq!(decimal(1207, &mut buf), "1207");
        assert_eq!(decimal(u64::MAX, &mut buf), u64::MAX.to_string());
    }
}
