//! Allocation assertions in tests: what each function of an actor allocates, per call, checked
//! on a multi-thread node while other tests run in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use runtime::gen_server::{self, CallReply, Caller, GenServer, StartOptions, Timeout};
use runtime::{ExitReason, traced};

#[global_allocator]
static ALLOC: runtime::CountingAlloc = runtime::CountingAlloc::system();

/// A counter server: `Add` must not allocate; `Snapshot` builds a report.
struct Counter {
    total: u64,
    history: Vec<u64>,
}

enum Req {
    Add(u64),
    Snapshot,
}

enum Reply {
    Total(u64),
    Report(String),
}

#[traced]
impl GenServer for Counter {
    type Args = ();
    type Call = Req;
    type Reply = Reply;
    type Cast = ();

    #[traced(skip)]
    async fn init((): ()) -> Result<Self, ExitReason> {
        Ok(Counter {
            total: 0,
            history: Vec::with_capacity(64),
        })
    }

    async fn handle_call(&mut self, req: Req, _from: &mut Caller<Reply>) -> CallReply<Reply> {
        match req {
            Req::Add(n) => CallReply::Reply(Reply::Total(self.add(n))),
            Req::Snapshot => CallReply::Reply(Reply::Report(self.report())),
        }
    }
}

#[traced]
impl Counter {
    /// Adds without allocating: the history has room for 64 entries.
    fn add(&mut self, n: u64) -> u64 {
        self.total += n;
        self.history.push(n);
        self.total
    }

    /// One allocation: the report string, sized up front.
    fn report(&self) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(64);
        let _ = write!(s, "total={} after {} adds", self.total, self.history.len());
        s
    }
}

async fn drive() -> String {
    let server = gen_server::start::<Counter>((), StartOptions::new())
        .await
        .unwrap();
    for n in 1..=10 {
        server.call(Req::Add(n), Timeout::Infinity).await.unwrap();
    }
    match server.call(Req::Snapshot, Timeout::Infinity).await.unwrap() {
        Reply::Report(s) => s,
        Reply::Total(n) => unreachable!("a snapshot answers a report, not {n}"),
    }
}

#[test]
fn the_hot_path_allocates_nothing_and_the_report_once() {
    let report = tprof::allocations(drive);
    assert_eq!(report.result.as_deref(), Ok("total=55 after 10 adds"));
    report
        .function("Counter::add")
        .calls(10)
        .allocates_nothing();
    report
        .function("Counter::report")
        .calls(1)
        .blocks(1)
        .bytes(64)
        .words(8);
    // The handler itself allocates nothing either: add and report are traced apart.
    report
        .function("<Counter as GenServer>::handle_call")
        .calls(11)
        .allocates_nothing();
}

#[test]
fn checks_narrow_to_one_process() {
    let report = tprof::allocations(drive);
    let f = report.profile.function("Counter::add").unwrap();
    let server = match f.entries[0].group {
        tprof::Group::Process(pid) => pid,
        tprof::Group::All => unreachable!("call_memory is per process"),
    };
    report.function("Counter::add").in_process(server).calls(10);
    assert_eq!(report.in_process(server, "Counter::report").blocks, 1);
    assert_eq!(
        report.process(server).blocks,
        1,
        "one block in all the server's traced code"
    );
}

#[test]
fn a_failed_assertion_prints_the_table_of_the_processes_involved() {
    let report = tprof::allocations(drive);
    let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        report.function("Counter::report").allocates_nothing();
    }))
    .unwrap_err();
    let msg = failure.downcast_ref::<String>().unwrap();
    assert!(msg.contains("expected no allocation"), "{msg}");
    assert!(msg.contains("1 call: 1 block, 64 bytes, 8 words"), "{msg}");
    assert!(
        msg.contains("Counter::report/1"),
        "the table is printed: {msg}"
    );
    assert!(msg.contains("bytes/call"), "{msg}");
    assert!(
        msg.contains("Counter::add/2"),
        "functions that allocated nothing are listed: {msg}"
    );
}

#[test]
fn a_function_never_called_is_an_error_that_says_why() {
    let report = tprof::allocations(|| async {});
    let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = report.function("Counter::add");
    }))
    .unwrap_err();
    let msg = failure.downcast_ref::<String>().unwrap();
    assert!(msg.contains("never called"), "{msg}");
}

#[tokio::test]
async fn the_async_form_measures_from_a_tokio_test() {
    let report = tprof::allocations_async(drive).await;
    assert_eq!(report.result.as_deref(), Ok("total=55 after 10 adds"));
    report
        .function("Counter::add")
        .calls(10)
        .allocates_nothing();
    report
        .function("Counter::report")
        .calls(1)
        .blocks(1)
        .bytes(64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blocking_form_in_a_tokio_test_panics_naming_the_async_one() {
    let failure = std::panic::catch_unwind(|| tprof::allocations(|| async { 1 })).unwrap_err();
    let msg = failure.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("tprof::allocations blocks")
            && msg.contains("call `tprof::allocations_async(..).await` there instead"),
        "{msg}"
    );
}

/// Two functions named `parse`, in two modules: only `b`'s allocates.
mod a {
    #[runtime::traced]
    pub(crate) fn parse(line: &str) -> usize {
        line.split(',').count()
    }
}

mod b {
    #[runtime::traced]
    pub(crate) fn parse(line: &str) -> Vec<&str> {
        line.split(',').collect()
    }
}

/// The message of the panic `check` raises.
fn panic_message(check: impl FnOnce()) -> String {
    let failure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)).unwrap_err();
    match failure.downcast::<String>() {
        Ok(msg) => *msg,
        Err(other) => other.downcast_ref::<&str>().unwrap().to_string(),
    }
}

#[test]
fn a_bare_name_two_modules_share_is_an_error_that_lists_them() {
    let report = tprof::allocations(|| async { a::parse("1,2") + b::parse("1,2,3").len() });
    assert_eq!(report.result, Ok(5));
    let msg = panic_message(|| {
        report.function("parse").allocates_nothing();
    });
    assert!(msg.contains("`parse` names 2 functions"), "{msg}");
    assert!(msg.contains("allocation_assertions::a::parse/1"), "{msg}");
    assert!(msg.contains("allocation_assertions::b::parse/1"), "{msg}");
    assert_eq!(report.profile.function("parse"), None);
}

#[test]
fn names_as_the_tables_print_them_check_that_function() {
    let report = tprof::allocations(|| async { a::parse("1,2") + b::parse("1,2,3").len() });
    // As the tables print it, with and without the arity, and with the module's last part.
    for name in [
        "allocation_assertions::a::parse/1",
        "allocation_assertions::a::parse",
        "a::parse",
        "a::parse/1",
    ] {
        report.function(name).calls(1).allocates_nothing();
    }
    for name in ["allocation_assertions::b::parse/1", "b::parse"] {
        report.function(name).calls(1).blocks(1);
        let msg = panic_message(|| {
            report.function(name).allocates_nothing();
        });
        assert!(msg.contains("expected no allocation"), "{name}: {msg}");
    }
    // The wrong arity is no function of the profile.
    let msg = panic_message(|| {
        let _ = report.function("a::parse/2");
    });
    assert!(msg.contains("never called"), "{msg}");
    // Per process too.
    let pid = report.profile.pids()[0];
    assert_eq!(report.in_process(pid, "b::parse/1").blocks, 1);
    assert_eq!(report.in_process(pid, "a::parse").blocks, 0);
    let msg = panic_message(|| {
        let _ = report.in_process(pid, "parse");
    });
    assert!(msg.contains("names 2 functions"), "{msg}");
    // Types' methods keep their `Type::method` names.
    let counter = tprof::allocations(drive);
    counter
        .function("allocation_assertions::Counter::add/2")
        .calls(10)
        .allocates_nothing();
}
