//! The html viewer of many processes (issues 22, 31): the page sums the processes by
//! registered name and by initial call, and stays a bounded page whatever the number of
//! processes: its markup does not grow, and past 200 processes its data keeps the largest 200
//! one by one and sums the others by name and initial call.

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
/// The page's data as it is written (arrays), not expanded.
fn compact(html: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"tprof-data\">";
    let start = html.find(open).expect("the data element") + open.len();
    let end = start + html[start..].find("</script>").expect("its end");
    serde_json::from_str(&html[start..end]).expect("JSON")
}

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
    // The data: the 200 largest processes one by one, the others summed by registered name
    // and initial call (it was a few dozen bytes a process: 12 MB for a call_time profile of
    // 100,000 processes).
    assert!(
        large.len() - small.len() < 64 << 10,
        "{} bytes for 100,000 processes, {} for 10",
        large.len(),
        small.len()
    );
    let data = compact(&large);
    let processes = data["processes"].as_array().unwrap();
    let count = |p: &Value| p.get(5).map_or(1, |n| n.as_u64().unwrap());
    assert_eq!(processes.iter().map(count).sum::<u64>(), N as u64);
    let summed: Vec<&Value> = processes.iter().filter(|p| count(p) > 1).collect();
    assert_eq!(processes.len() - summed.len(), 200, "kept one by one");
    // (name, initial call): 3 initial calls without a name, and with `registered`.
    assert_eq!(summed.len(), 6, "{summed:?}");
    assert!(
        summed
            .iter()
            .any(|p| p[0].as_str().unwrap().starts_with("app::worker/1 (33,")),
        "{summed:?}"
    );
    let note = data["note"].as_str().unwrap();
    assert!(
        note.starts_with(
            "The 200 largest of 100,000 processes are shown one by one; the other 99,800"
        ),
        "{note}"
    );
    // Every process's value is in the total and in the stacks that the flame graph draws.
    let values: u64 = list.iter().map(|p| p.3).sum();
    assert_eq!(data["total"].as_u64().unwrap(), values);
    let stacks: u64 = data["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[3].as_u64().unwrap())
        .sum();
    assert_eq!(stacks, values);
    let rows: Vec<(u64, u64)> = data["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[2].as_u64().unwrap(), r[3].as_u64().unwrap()))
        .collect();
    assert_eq!(rows.iter().map(|r| r.0).sum::<u64>(), N as u64, "calls");
    assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), values);
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
