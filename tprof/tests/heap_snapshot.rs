//! Heap snapshots: a known tree of processes comes out with the nodes, edges and sizes
//! expected, in a file that V8's structural rules accept, read back with serde_json.
//!
//! With `HEAP_SNAPSHOT_OUT=FILE`, the known tree's snapshot is also written to FILE, to check
//! by hand with the real tools (`../shared/validators/check.sh FILE`: memlab and V8's parser).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Duration;

use runtime::supervisor::{
    self, ChildSpec, StartOptions, Strategy, SupervisorFlags, SupervisorSpec,
};
use runtime::{Node, Pid, receive, self_pid};
use serde_json::Value;
use tprof::{HeapSnapshot, LiveSite};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// What the big worker holds.
const BIG: usize = 4 << 20;
/// Messages queued for the queue worker, each boxed (128 bytes).
const QUEUED: usize = 100;

/// Tells a worker to end (never sent: the snapshot is taken while they all wait).
struct Stop;

/// A parsed snapshot: nodes with their outgoing edges.
struct Snap {
    types: Vec<String>,
    edge_types: Vec<String>,
    nodes: Vec<SnapNode>,
    strings: Vec<String>,
}

struct SnapNode {
    kind: String,
    name: String,
    self_size: u64,
    /// (type, name, target node index)
    edges: Vec<(String, String, usize)>,
}

/// Parses `text`, checking V8's structural rules on the way.
fn parse(text: &str) -> Snap {
    // Key order: DevTools' streaming loader needs `strings` last, after nodes and edges.
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap_or(usize::MAX);
    let order = [
        "snapshot",
        "nodes",
        "edges",
        "trace_function_infos",
        "strings",
    ]
    .map(at);
    assert!(order.windows(2).all(|w| w[0] < w[1]), "key order {order:?}");
    let v: Value = serde_json::from_str(text).expect("valid JSON");
    let meta = &v["snapshot"]["meta"];
    let node_fields = meta["node_fields"].as_array().unwrap();
    let edge_fields = meta["edge_fields"].as_array().unwrap();
    assert_eq!(node_fields.len(), 7);
    assert_eq!(
        node_fields[..5],
        ["type", "name", "id", "self_size", "edge_count"].map(Value::from)
    );
    assert_eq!(
        edge_fields[..],
        ["type", "name_or_index", "to_node"].map(Value::from)
    );
    let types: Vec<String> = meta["node_types"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    let edge_types: Vec<String> = meta["edge_types"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    let nums = |key: &str| -> Vec<u64> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    };
    let (nodes, edges) = (nums("nodes"), nums("edges"));
    let strings: Vec<String> = v["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    let node_count = v["snapshot"]["node_count"].as_u64().unwrap() as usize;
    let edge_count = v["snapshot"]["edge_count"].as_u64().unwrap() as usize;
    assert_eq!(nodes.len(), node_count * 7);
    assert_eq!(edges.len(), edge_count * 3);
    let mut ids = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut e = 0;
    for n in nodes.chunks(7) {
        assert!(ids.insert(n[2]), "node ids are unique");
        let mut node = SnapNode {
            kind: types[n[0] as usize].clone(),
            name: strings[n[1] as usize].clone(),
            self_size: n[3],
            edges: Vec::new(),
        };
        for _ in 0..n[4] {
            let (t, name, to) = (edges[e] as usize, edges[e + 1], edges[e + 2] as usize);
            e += 3;
            assert_eq!(to % 7, 0, "to_node is an offset into nodes");
            assert!(to < nodes.len(), "to_node {to} in range");
            let kind = edge_types[t].clone();
            let name = if kind == "element" || kind == "hidden" {
                name.to_string()
            } else {
                strings[name as usize].clone()
            };
            node.edges.push((kind, name, to / 7));
        }
        out.push(node);
    }
    assert_eq!(
        e,
        edges.len(),
        "the edge counts of the nodes add up to edge_count"
    );
    Snap {
        types,
        edge_types,
        nodes: out,
        strings,
    }
}

impl Snap {
    /// Nodes reachable from the root, following strong edges only, without passing `skip`.
    fn reachable(&self, skip: Option<usize>) -> Vec<bool> {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![0];
        seen[0] = true;
        while let Some(n) = stack.pop() {
            for &(ref kind, _, to) in &self.nodes[n].edges {
                if kind != "weak" && Some(to) != skip && !seen[to] {
                    seen[to] = true;
                    stack.push(to);
                }
            }
        }
        seen
    }

    /// What `n` retains: itself and every node the root reaches only through it (its
    /// dominated nodes), as DevTools computes it.
    fn retained(&self, n: usize) -> u64 {
        let without = self.reachable(Some(n));
        (0..self.nodes.len())
            .filter(|&i| i == n || !without[i])
            .map(|i| self.nodes[i].self_size)
            .sum()
    }

    /// The node `from`'s edge named `name`, as (type, target).
    fn edge(&self, from: usize, name: &str) -> Option<(&str, usize)> {
        self.nodes[from]
            .edges
            .iter()
            .find(|e| e.1 == name)
            .map(|e| (e.0.as_str(), e.2))
    }

    /// The node of process `pid` (the node's edge named after it).
    fn process(&self, pid: Pid) -> usize {
        self.edge(1, &pid.to_string())
            .expect("every process hangs off the node")
            .1
    }

    fn edges_named(&self, from: usize, name: &str) -> Vec<(&str, usize)> {
        self.nodes[from]
            .edges
            .iter()
            .filter(|e| e.1 == name)
            .map(|e| (e.0.as_str(), e.2))
            .collect()
    }
}

/// The tree: a top supervisor with a sub-supervisor (holding the big worker), the queue worker
/// and a small worker; beside it, a watcher linked to the small worker and monitoring the big
/// one. Returns the pids by role.
fn known_tree(node: &Node) -> HashMap<&'static str, Pid> {
    let (tx, rx) = mpsc::channel::<(&'static str, Pid)>();
    let worker = |role: &'static str, tx: mpsc::Sender<(&'static str, Pid)>, bytes: usize| {
        ChildSpec::worker(role, move || {
            let tx = tx.clone();
            async move {
                let held = vec![1u8; bytes];
                tx.send((role, self_pid())).unwrap();
                let Stop = receive().await;
                drop(held);
            }
        })
    };
    let sub = SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForOne)).child(worker(
        "big",
        tx.clone(),
        BIG,
    ));
    let top = SupervisorSpec::new(SupervisorFlags::new(Strategy::OneForOne))
        .child(ChildSpec::supervisor(
            "sub",
            sub,
            StartOptions::new().name("sub_sup"),
        ))
        .child(worker("queue", tx.clone(), 0))
        .child(worker("small", tx.clone(), 0));
    let top = node
        .block_on(supervisor::start_on(
            node,
            top,
            StartOptions::new().name("top_sup"),
        ))
        .unwrap();
    let mut pids: HashMap<&'static str, Pid> = (0..3)
        .map(|_| rx.recv_timeout(Duration::from_secs(60)).unwrap())
        .collect();
    pids.insert("top", top);
    pids.insert("sub", node.whereis("sub_sup").unwrap());
    node.register("queue", pids["queue"]).unwrap();
    let (small, big) = (pids["small"], pids["big"]);
    node.spawn(async move {
        runtime::link(small).unwrap();
        runtime::monitor(big).unwrap();
        tx.send(("watcher", self_pid())).unwrap();
        let Stop = receive().await;
    })
    .unwrap();
    let (role, watcher) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    pids.insert(role, watcher);
    for _ in 0..QUEUED {
        node.send(pids["queue"], [7u64; 16]);
    }
    pids
}

fn snapshot(node: &Node, sites: &[LiveSite]) -> (Snap, tprof::SnapshotSummary) {
    let mut out = Vec::new();
    let summary = HeapSnapshot::of(node)
        .live_sites(sites)
        .write(&mut out)
        .unwrap();
    (parse(std::str::from_utf8(&out).unwrap()), summary)
}

#[test]
fn a_known_tree_has_the_nodes_edges_and_sizes_expected() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let pids = known_tree(&node);
    let dead = Pid::from_parts(node.id(), 100_000, 1);
    let sites = [
        LiveSite {
            pid: pids["big"],
            site: "app::load_table".into(),
            bytes: 3 << 20,
            objects: 3,
        },
        LiveSite {
            pid: dead,
            site: "app::gone".into(),
            bytes: 10,
            objects: 1,
        },
    ];
    let (snap, summary) = snapshot(&node, &sites);
    if let Some(path) = std::env::var_os("HEAP_SNAPSHOT_OUT") {
        let mut file = std::fs::File::create(path).unwrap();
        HeapSnapshot::of(&node)
            .live_sites(&sites)
            .write(&mut file)
            .unwrap();
    }
    assert_eq!(
        summary.processes, 6,
        "two supervisors, three workers, the watcher"
    );
    assert!(summary.heap_figures);
    assert_eq!(summary.sites_dropped, 1);
    assert_eq!(summary.nodes, snap.nodes.len());

    // Every node is reachable from the root by strong edges.
    let reached = snap.reachable(None);
    assert!(reached.iter().all(|&r| r), "unreachable: {:?}", {
        let names: Vec<&str> = (0..reached.len())
            .filter(|&i| !reached[i])
            .map(|i| snap.nodes[i].name.as_str())
            .collect();
        names
    });
    assert_eq!(snap.nodes[0].kind, "synthetic");
    assert_eq!(
        snap.nodes[0].edges,
        [("element".to_owned(), "1".to_owned(), 1)]
    );
    assert_eq!(snap.nodes[1].name, format!("runtime::Node {}", node.id()));
    assert_eq!(snap.nodes[1].edges.len(), 6);

    let p = |role: &str| snap.process(pids[role]);
    // The node holds the top supervisor and the watcher; the supervised, weakly.
    for role in ["top", "watcher"] {
        assert_eq!(
            snap.edge(1, &pids[role].to_string()).unwrap().0,
            "property",
            "{role}"
        );
    }
    for role in ["sub", "big", "queue", "small"] {
        assert_eq!(
            snap.edge(1, &pids[role].to_string()).unwrap().0,
            "weak",
            "{role}"
        );
    }
    // Supervision: the retaining edges.
    for (sup, child) in [
        ("top", "sub"),
        ("top", "queue"),
        ("top", "small"),
        ("sub", "big"),
    ] {
        assert_eq!(
            snap.edge(p(sup), &pids[child].to_string()),
            Some(("property", p(child))),
            "{sup} -> {child}"
        );
    }
    // Processes are objects named after their initial call.
    assert_eq!(snap.nodes[p("top")].kind, "object");
    assert_eq!(snap.nodes[p("top")].name, "runtime::supervisor::init/1");
    // Registered names are strings under their processes.
    let (kind, name) = snap.edge(p("queue"), "registered_name").unwrap();
    assert_eq!(
        (
            kind,
            snap.nodes[name].name.as_str(),
            snap.nodes[name].kind.as_str()
        ),
        ("property", "queue", "string")
    );
    // Links and monitors are weak, both ways for a link.
    assert_eq!(
        snap.edges_named(p("watcher"), "link"),
        [("weak", p("small"))]
    );
    assert!(
        snap.edges_named(p("small"), "link")
            .contains(&("weak", p("watcher")))
    );
    assert_eq!(
        snap.edges_named(p("watcher"), "monitor"),
        [("weak", p("big"))]
    );
    assert!(
        snap.edges_named(p("top"), "link")
            .contains(&("weak", p("queue")))
    );

    // The queue worker's mailbox: its messages and their boxes.
    let (_, mailbox) = snap.edge(p("queue"), "mailbox").unwrap();
    assert_eq!(snap.nodes[mailbox].name, "runtime::Mailbox");
    assert!(
        snap.nodes[mailbox].self_size >= (QUEUED * 128) as u64,
        "{}",
        snap.nodes[mailbox].self_size
    );
    let (_, len) = snap.edge(mailbox, "len").unwrap();
    assert_eq!(
        (snap.nodes[len].kind.as_str(), snap.nodes[len].name.as_str()),
        ("number", "100")
    );
    assert!(
        snap.edge(p("small"), "mailbox").is_none(),
        "an empty mailbox is left out"
    );

    // The live site under the big worker, out of its own self size.
    let (kind, site) = snap.edge(p("big"), "app::load_table").unwrap();
    assert_eq!(
        (kind, snap.nodes[site].kind.as_str()),
        ("property", "native")
    );
    assert_eq!(snap.nodes[site].self_size, 3 << 20);
    let (_, objects) = snap.edge(site, "objects").unwrap();
    assert_eq!(snap.nodes[objects].name, "3");
    assert!(!snap.strings.iter().any(|s| s == "app::gone"));

    // Self sizes are the heap accounts' live bytes, less what mailbox and sites hold:
    // retained sizes give them back, and the supervisors retain their subtrees.
    let big_live = runtime::heap::process_heap(pids["big"]).unwrap().live_bytes;
    assert!(big_live >= BIG as u64);
    let big = snap.retained(p("big"));
    assert!(
        big >= BIG as u64 && big <= big_live + 4096,
        "big retains {big} of {big_live}"
    );
    assert!(snap.nodes[p("big")].self_size + (3 << 20) <= big_live + 4096);
    assert!(snap.retained(p("queue")) >= (QUEUED * 128) as u64);
    assert!(snap.retained(p("sub")) >= big);
    assert!(snap.retained(p("top")) >= big + snap.retained(p("queue")));
    // Links and monitors retain nothing: the watcher holds only itself.
    assert_eq!(
        snap.retained(p("watcher")),
        snap.nodes[p("watcher")].self_size
    );
    assert!(snap.retained(p("watcher")) < BIG as u64);
    assert!(snap.types.len() >= 14 && snap.edge_types.len() == 7);
}

#[test]
fn a_snapshot_of_an_empty_node_is_the_root_and_the_node() {
    let node = Node::builder().current_thread().build().unwrap();
    let (snap, summary) = snapshot(&node, &[]);
    assert_eq!(summary.processes, 0);
    assert_eq!(snap.nodes.len(), 2);
    assert_eq!(snap.nodes[1].edges.len(), 0);
}

#[test]
fn a_failing_writer_is_an_error() {
    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let node = Node::builder().current_thread().build().unwrap();
    let err = tprof::heap_snapshot(&node, &mut Broken).unwrap_err();
    assert_eq!(err.to_string(), "disk full");
}

/// One writer convention: every function that writes a profile, a report or a snapshot takes
/// its writer as `&mut dyn Write` (the heap snapshot took `impl Write`, the archive
/// `&mut dyn Write`). Pinned as function pointers, which a generic writer cannot coerce to.
#[test]
fn every_writer_is_taken_as_mut_dyn_write() {
    use runtime::NodeHandle;
    use std::io::{Result, Write};
    use tprof::{Profile, SnapshotSummary};
    let _: fn(&NodeHandle, &mut dyn Write) -> Result<SnapshotSummary> = tprof::heap_snapshot;
    let _: fn(&HeapSnapshot<'static>, &mut dyn Write) -> Result<SnapshotSummary> =
        HeapSnapshot::write;
    let _: fn(&Profile, &mut dyn Write) -> std::result::Result<(), tprof::archive::ArchiveError> =
        tprof::archive::write;
}

#[test]
fn thousands_of_processes_in_a_chain_of_links_are_all_there() {
    // More processes than one chunk of records (4096), each linked to the one before it.
    const N: usize = 5000;
    let node = Node::builder().worker_threads(2).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let mut prev: Option<Pid> = None;
    for _ in 0..N {
        let tx = tx.clone();
        let pid = node
            .spawn(async move {
                if let Some(prev) = prev {
                    runtime::link(prev).unwrap();
                }
                tx.send(()).unwrap();
                let Stop = receive().await;
            })
            .unwrap();
        prev = Some(pid);
    }
    for _ in 0..N {
        rx.recv_timeout(Duration::from_secs(60)).unwrap();
    }
    let (snap, summary) = snapshot(&node, &[]);
    assert_eq!(summary.processes, N);
    assert_eq!(snap.nodes[1].edges.len(), N);
    assert!(snap.reachable(None).iter().all(|&r| r));
    // Every process but the ends is linked both ways: 2 * (N - 1) weak link edges.
    let links: usize = snap
        .nodes
        .iter()
        .map(|n| n.edges.iter().filter(|e| e.1 == "link").count())
        .sum();
    assert_eq!(links, 2 * (N - 1));
    // Each link points at a process node named like the others.
    for n in &snap.nodes[2..] {
        for (kind, name, to) in &n.edges {
            assert_eq!(kind, "weak", "{name}");
            assert_eq!(snap.nodes[*to].kind, "object");
        }
    }
}
