//! The html viewer of many processes (issue 22): the page sums the processes by registered
//! name and by initial call, and stays a bounded page whatever the number of processes: its
//! markup does not grow, and its data grows by a few dozen bytes a process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{embedded, entry, function, process};
use serde_json::{Value, json};
use tprof::export::{self, Format};
use tprof::{FunctionTrace, Group, Profile, TraceType};

/// A flat call_time profile of one function, `handle`, called by each process in `list`:
/// `(name, initial call, calls, nanoseconds)`, the processes `<0.100.0>` on.
fn profile_of(list: &[(Option<&str>, &str, u64, u64)]) -> Profile {
    let pid = |k: usize| runtime::Pid::from_parts(0, 100 + k as u32, 0);
    let entries = list
        .iter()
        .enumerate()
        .map(|(k, &(_, _, calls, ns))| entry(Group::Process(pid(k)), calls, ns))
        .collect();
    let mut profile = Profile::new(
        TraceType::CallTime,
        vec![FunctionTrace {
            function: function("app", "handle", 1, 10),
            entries,
        }],
    );
    profile.processes = list
        .iter()
        .enumerate()
        .map(|(k, &(name, call, _, _))| process(pid(k), name, call, 0))
        .collect();
    profile
}

/// The embedded data's aggregates, by registered name and by initial call.
fn aggregates(html: &str) -> (Value, Value) {
    let data = embedded(html);
    let a = &data["aggregates"];
    (a["by_name"].clone(), a["by_initial_call"].clone())
}

#[test]
fn the_page_sums_processes_by_initial_call_and_by_registered_name() {
    // 5 workers, 3 acceptors sharing a name, 2 supervisors (one registered).
    let mut list = Vec::new();
    for k in 0..5 {
        list.push((None, "app::worker/1", k + 1, 100 * (k + 1)));
    }
    for k in 0..3 {
        list.push((Some("acceptor"), "app::conn/1", 10 + k, 1_000));
    }
    list.push((Some("sup"), "app::sup/0", 7, 20));
    list.push((None, "app::sup/0", 1, 10));
    let html = export::to_string(Format::Html, &profile_of(&list)).unwrap();
    let (by_name, by_call) = aggregates(&html);
    // [key, processes, calls, value], largest value first.
    assert_eq!(
        by_call,
        json!([
            ["app::conn/1", 3, 10 + 11 + 12, 3_000],
            [
                "app::worker/1",
                5,
                1 + 2 + 3 + 4 + 5,
                100 + 200 + 300 + 400 + 500
            ],
            ["app::sup/0", 2, 8, 30],
        ])
    );
    assert_eq!(
        by_name,
        json!([
            ["acceptor", 3, 33, 3_000],
            [null, 6, 15 + 1, 1_500 + 10],
            ["sup", 1, 7, 20],
        ])
    );
}

/// The page's markup outside its two scripts: the elements the page has before its viewer
/// draws.
fn markup(html: &str) -> String {
    let open = "<script type=\"application/json\" id=\"tprof-data\">";
    let start = html.find(open).expect("the data element");
    let end = html.rfind("</script>").expect("the viewer's end");
    format!("{}{}", &html[..start], &html[end..])
}

#[test]
fn a_page_of_100k_processes_is_bounded() {
    const N: usize = 100_000;
    let calls = ["app::worker/1", "app::conn/1", "app::sup/0"];
    let list: Vec<_> = (0..N)
        .map(|k| {
            let name = (k % 1000 == 0).then_some("registered");
            (name, calls[k % 3], 1, 1_000 + k as u64 % 7)
        })
        .collect();
    let small = export::to_string(Format::Html, &profile_of(&list[..10])).unwrap();
    let large = export::to_string(Format::Html, &profile_of(&list)).unwrap();
    // The markup does not grow with the processes: the viewer draws a page of rows at a time.
    let (small_markup, large_markup) = (markup(&small), markup(&large));
    assert_eq!(
        large_markup.matches('<').count(),
        small_markup.matches('<').count()
    );
    assert!(large.contains("const PAGE = 200;") && large.contains("const MENU = 200;"));
    // The data: each process, its stack and its row, as arrays; the initial calls once.
    let per_process = (large.len() - small.len()) / (N - 10);
    assert!(
        per_process <= 128,
        "{per_process} bytes a process ({} in all)",
        large.len()
    );
    assert_eq!(
        large.matches("app::worker/1").count(),
        2,
        "once in the table, once summed"
    );
    let (by_name, by_call) = aggregates(&large);
    let counts: Vec<u64> = by_call
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a[1].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), N as u64);
    assert_eq!(counts.len(), 3);
    assert_eq!(by_name[0][0], Value::Null);
    let registered: u64 = list.iter().filter(|p| p.0.is_some()).map(|p| p.3).sum();
    assert_eq!(
        by_name[1],
        json!(["registered", N / 1000, N / 1000, registered])
    );
}
