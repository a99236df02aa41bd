//! `#[traced]` registers a callsite per function, of every shape, before any call, and leaves
//! each function's behaviour unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;

use async_trait::async_trait;
use runtime::trace::{Callsite, TracePattern, callsites};
use runtime::traced;

#[traced]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[traced]
fn parse_twice(s: &str) -> Result<u32, std::num::ParseIntError> {
    let n: u32 = s.parse()?;
    if n == 0 {
        return Ok(0);
    }
    Ok(n * 2)
}

#[traced]
fn largest<T: PartialOrd + Copy>(items: &[T]) -> Option<T> {
    items.iter().copied().fold(None, |best, x| match best {
        Some(b) if b >= x => Some(b),
        _ => Some(x),
    })
}

#[traced]
async fn fetch(key: &str, fallback: u64) -> Result<u64, String> {
    let n: u64 = key.parse().map_err(|e| format!("{e}"))?;
    tokio::task::yield_now().await;
    Ok(n.max(fallback))
}

#[traced(name = "renamed")]
fn original_name() -> &'static str {
    "x"
}

#[traced]
fn later(x: u32) -> impl Future<Output = u32> {
    async move { x + 1 }
}

struct Store {
    base: u32,
}

#[traced]
impl Store {
    fn get(&self, k: u32) -> u32 {
        self.base + k
    }

    async fn get_async(&self, k: u32) -> u32 {
        tokio::task::yield_now().await;
        self.base + k
    }

    fn new(base: u32) -> Store {
        Store { base }
    }

    #[traced(skip)]
    fn untraced(&self) -> u32 {
        self.base
    }
}

#[async_trait]
trait Service {
    async fn handle(&self, x: u32) -> u32;
}

// `#[traced]` first: it sees `async fn`s, then async-trait boxes them.
#[traced]
#[async_trait]
impl Service for Store {
    async fn handle(&self, x: u32) -> u32 {
        self.base * x
    }
}

struct Other;

// `#[async_trait]` first: `#[traced]` sees functions returning a boxed future.
#[async_trait]
#[traced]
impl Service for Other {
    async fn handle(&self, x: u32) -> u32 {
        x + 100
    }
}

fn blocks() -> (u32, impl Future<Output = u32>) {
    let sync = runtime::trace::traced!("checksum", { 40 + 2 });
    let fut = runtime::trace::traced!("fetch_block", async { 7u32 });
    (sync, fut)
}

// Two functions `module_path!()` cannot tell apart: each nested in a different body.
fn first_outer() -> u32 {
    #[traced]
    fn helper() -> u32 {
        1
    }
    helper()
}

fn second_outer() -> u32 {
    #[traced]
    fn helper() -> u32 {
        2
    }
    helper()
}

fn find(function: &str) -> &'static Callsite {
    callsites()
        .iter()
        .find(|c| c.module() == module_path!() && c.function() == function)
        .unwrap_or_else(|| panic!("no callsite for {function}: {:?}", names()))
}

fn names() -> Vec<String> {
    callsites().iter().map(|c| c.to_string()).collect()
}

#[test]
fn every_shape_registers_its_callsite_with_module_function_and_arity() {
    let expected = [
        ("add", 2),
        ("parse_twice", 1),
        ("largest", 1),
        ("fetch", 2),
        ("renamed", 0),
        ("later", 1),
        ("Store::get", 2),
        ("Store::get_async", 2),
        ("Store::new", 1),
        ("<Store as Service>::handle", 2),
        ("<Other as Service>::handle", 2),
        ("checksum", 0),
        ("fetch_block", 0),
    ];
    for (function, arity) in expected {
        let cs = find(function);
        assert_eq!(cs.arity(), arity, "{cs}");
        assert!(cs.file().ends_with("trace_callsites.rs"), "{}", cs.file());
        assert!(cs.line() > 0);
    }
    assert!(
        callsites()
            .iter()
            .all(|c| c.function() != "Store::untraced")
    );
    assert_eq!(
        find("add").to_string(),
        format!("{}::add/2", module_path!())
    );
    // Ids are dense and distinct.
    let mut ids: Vec<usize> = expected.iter().map(|(f, _)| find(f).id()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), expected.len());
    assert!(ids.iter().all(|&i| i < callsites().len()));
}

#[test]
fn colliding_names_get_their_line_and_stay_unique() {
    assert_eq!(first_outer() + second_outer(), 3);
    let helpers: Vec<&'static Callsite> = callsites()
        .iter()
        .filter(|c| c.module() == module_path!() && c.written_name() == "helper")
        .collect();
    assert_eq!(helpers.len(), 2);
    let names: Vec<String> = helpers.iter().map(|c| c.function().to_string()).collect();
    assert_ne!(names[0], names[1]);
    for (c, name) in helpers.iter().zip(&names) {
        assert_eq!(name, &format!("helper@{}", c.line()));
        assert!(
            c.to_string().ends_with(&format!("::helper@{}/0", c.line())),
            "{c}"
        );
    }
    // A pattern names one of them exactly.
    let one = TracePattern::function(module_path!(), names[0].clone());
    assert_eq!(callsites().iter().filter(|c| one.matches(c)).count(), 1);
}

#[test]
fn traced_functions_behave_as_before() {
    assert_eq!(add(2, 3), 5);
    assert_eq!(parse_twice("21"), Ok(42));
    assert_eq!(parse_twice("0"), Ok(0));
    assert!(parse_twice("x").is_err());
    assert_eq!(largest(&[3, 9, 2]), Some(9));
    assert_eq!(largest::<f64>(&[]), None);
    assert_eq!(original_name(), "x");
    let (sync, fut) = blocks();
    assert_eq!(sync, 42);
    let store = Store::new(10);
    assert_eq!(store.get(5), 15);
    assert_eq!(store.untraced(), 10);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(fetch("7", 9).await, Ok(9));
        assert!(fetch("seven", 0).await.is_err());
        assert_eq!(later(1).await, 2);
        assert_eq!(fut.await, 7);
        assert_eq!(store.get_async(1).await, 11);
        assert_eq!(store.handle(3).await, 30);
        assert_eq!(Other.handle(1).await, 101);
    });
}

#[test]
fn patterns_select_by_module_function_and_arity() {
    let module = module_path!();
    let count = |p: &TracePattern| callsites().iter().filter(|c| p.matches(c)).count();
    assert_eq!(count(&TracePattern::module(module)), 15);
    assert_eq!(count(&TracePattern::function(module, "add")), 1);
    assert_eq!(count(&TracePattern::mfa(module, "add", 2)), 1);
    assert_eq!(count(&TracePattern::mfa(module, "add", 3)), 0);
    assert_eq!(count(&TracePattern::module("no::such::module")), 0);
    assert!(count(&TracePattern::all()) >= 15);
}
