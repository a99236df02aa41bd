//! The counting allocator under the optimizer (issue 28): functions that allocate a value, compare
//! it and free it, with `CountingAlloc` as the global allocator, compute what they say.
//!
//! `__rust_alloc` and `__rust_dealloc` are defined in this binary (it holds the
//! `#[global_allocator]`), so the allocator's free path inlines into these functions' drop glue,
//! and LLVM sees a block come from `__rust_alloc` (a fresh object of exactly the size asked) and
//! the free path reach its tag outside it. When the allocator reached the tag through the
//! program's pointer (`ptr.sub(8)`), that access was out of the block's bounds, LLVM concluded
//! that every path freeing the block was unreachable and deleted them: in a release build
//! `builds_a_vec_of_strings_and_compares_it` compiled to a trap (SIGILL), and an `assert_eq!` of
//! two equal values to an unconditional failure. Run in debug, these only check the values; the
//! optimized run (`.ci/run` runs this file with the workspace's crates optimized as in release,
//! `--config .ci/optimized.toml`, or run it with `--release`) is the one that catches the optimizer.
//!
//! Each function is `#[inline(never)]` and takes its input through `black_box`, so that the block
//! it allocates, compares and frees is its own, as in the shapes that failed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use runtime::trace::{ProcessSpec, TracePattern};
use runtime::{Node, Pid, receive, self_pid, traced};
use tprof::{ServerOptions, Tprof, TraceType};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// Builds a one-string vector and compares it with `names`.
#[inline(never)]
fn same_names(names: &[String]) -> bool {
    let expected = vec![String::from("holdout_missing")];
    names == expected.as_slice()
}

#[test]
fn builds_a_vec_of_strings_and_compares_it() {
    let names = vec![String::from("holdout_missing")];
    assert!(same_names(black_box(&names)));
    assert!(!same_names(black_box(&[String::from("other")])));
}

/// What a test's own types look like: a count and the items that failed.
#[derive(Debug, PartialEq)]
enum Item {
    Pid(Pid),
    Name(String),
}

#[derive(Debug, PartialEq)]
struct Outcome {
    count: usize,
    failed: Vec<Item>,
}

#[inline(never)]
fn outcome_of(name: &str) -> Outcome {
    Outcome {
        count: 1,
        failed: vec![Item::Name(black_box(name).to_string())],
    }
}

#[test]
fn an_assert_eq_of_equal_values_passes() {
    let got = outcome_of("holdout_missing");
    assert_eq!(
        got,
        Outcome {
            count: 1,
            failed: vec![Item::Name("holdout_missing".to_string())],
        }
    );
}

/// A value aligned to more than 16 keeps its tag in a footer after its bytes: the free path
/// reaches past the block's end.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(align(64))]
struct Wide([u64; 3]);

#[inline(never)]
fn same_wide(x: u64) -> bool {
    let boxed = Box::new(Wide([x, x + 1, x + 2]));
    let other = Box::new(Wide([x, x + 1, x + 2]));
    **black_box(&boxed) == *other
}

/// Alignment 16 takes a 16-byte header.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(align(16))]
struct Pair(u64, u64);

#[inline(never)]
fn same_pairs(x: u64) -> bool {
    let pairs = vec![Pair(x, x); 3];
    pairs == black_box(vec![Pair(x, x); 3])
}

#[test]
fn blocks_with_footers_and_wide_headers_compare_equal() {
    assert!(same_wide(black_box(7)));
    assert!(same_pairs(black_box(9)));
}

/// Grows a string (realloc, which reads the old block's tag) and compares it.
#[inline(never)]
fn grown(n: usize) -> bool {
    let mut s = String::with_capacity(1);
    for _ in 0..n {
        s.push('x');
    }
    s == "x".repeat(black_box(n))
}

#[test]
fn a_reallocated_block_compares_equal() {
    assert!(grown(black_box(100)));
}

/// The same inside a process, where the allocator charges the process's account (its fast
/// paths), and a message moves its envelope between accounts (`move_box`, which rewrites a
/// block's tag).
#[test]
fn inside_processes_values_compare_equal() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let ok = node
        .run(async {
            let me = self_pid();
            let worker = runtime::spawn(async move {
                let names: Vec<String> = receive().await;
                runtime::send(me, same_names(&names));
            })
            .unwrap();
            runtime::send(worker, vec![String::from("holdout_missing")]);
            let mut got = outcome_of("holdout_missing");
            got.failed.insert(0, Item::Pid(black_box(worker)));
            let same = receive::<bool>().await;
            same && got
                == Outcome {
                    count: 1,
                    failed: vec![Item::Pid(worker), Item::Name("holdout_missing".to_string())],
                }
                && grown(black_box(50))
                && same_wide(black_box(3))
        })
        .unwrap();
    assert!(ok);
}

#[traced]
fn work(n: usize) -> usize {
    black_box(Vec::<u64>::with_capacity(n)).capacity()
}

/// The shape the failure was first seen in: a server-aided call_memory session, `enable_trace`
/// of a list of one live pid and one name no process has, and an `assert_eq!` of what it
/// reports against the expected value, built in the test's own types. It failed on every run
/// of a release build, both sides printing `Outcome { count: 1, failed: [Name(..)] }`.
#[test]
fn enable_trace_of_a_list_reports_what_is_expected() {
    let node = Node::builder().worker_threads(2).build().unwrap();
    let tprof = node
        .block_on(Tprof::start(
            &node,
            ServerOptions::new().trace_type(TraceType::CallMemory),
        ))
        .unwrap();
    node.block_on(tprof.set_pattern(TracePattern::module(module_path!())))
        .unwrap();
    let alive = node
        .spawn(async {
            let () = receive().await;
            work(3);
        })
        .unwrap();
    let outcome = node
        .block_on(tprof.enable_trace(
            ProcessSpec::List(vec![
                ProcessSpec::Pid(alive),
                ProcessSpec::Name("holdout_missing".into()),
            ]),
            false,
        ))
        .unwrap();
    let got = Outcome {
        count: outcome.count,
        failed: outcome
            .failures
            .into_iter()
            .map(|(spec, _)| match spec {
                ProcessSpec::Pid(pid) => Item::Pid(pid),
                ProcessSpec::Name(name) => Item::Name(name.to_string()),
                other => panic!("an item of the list was neither a pid nor a name: {other:?}"),
            })
            .collect(),
    };
    assert_eq!(
        got,
        Outcome {
            count: 1,
            failed: vec![Item::Name("holdout_missing".to_string())],
        }
    );
    node.send(alive, ());
    node.block_on(tprof.stop()).unwrap();
}
