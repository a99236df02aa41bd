//! Hand-built sample sets: a builder, and the profiles the report tests share.

use runtime::Pid;
use tprof::samples::{
    SampleFrame, SampleRecord, SampleSource, SampleStack, SampleThread, SamplerKind, WaitState,
};
use tprof::{Function, ProcessRecord, Profile, TraceType};

/// Builds a profile's sample set by hand.
pub(crate) struct Build {
    pub(crate) profile: Profile,
}

impl Build {
    pub(crate) fn new() -> Build {
        Build {
            profile: Profile::empty(TraceType::CallCount),
        }
    }

    /// A source: `hz`, sampling for `seconds`, having dropped `dropped` samples.
    pub(crate) fn source(
        &mut self,
        sampler: SamplerKind,
        hz: u32,
        seconds: u64,
        dropped: f64,
    ) -> u32 {
        let set = &mut self.profile.samples;
        set.sources.push(SampleSource {
            run: 0,
            node: 0,
            sampler,
            hz,
            alloc_rate: None,
            dropped,
            lost_frees: 0,
            before_sampling: 0,
            native_walked: true,
            duration_ns: seconds * 1_000_000_000,
            capacity: 1000,
            cpu: None,
        });
        (set.sources.len() - 1) as u32
    }

    /// A thread of source 0.
    pub(crate) fn thread(&mut self, tid: i32, name: Option<&str>) -> u32 {
        let set = &mut self.profile.samples;
        set.threads.push(SampleThread {
            source: 0,
            tid,
            name: name.map(str::to_owned),
        });
        (set.threads.len() - 1) as u32
    }

    /// A traced function `app::NAME/0` of `file:line`, and its frame.
    pub(crate) fn traced(&mut self, name: &str, file: &str, line: u32) -> u32 {
        self.profile.function_table.push(Function {
            module: "app".into(),
            name: name.into(),
            arity: 0,
            file: file.into(),
            line,
        });
        let function = (self.profile.function_table.len() - 1) as u32;
        self.frame(SampleFrame {
            function: Some(function),
            name: String::new(),
            file: None,
            line: None,
            address: 0,
        })
    }

    /// A native frame.
    pub(crate) fn native(&mut self, name: &str, place: Option<(&str, u32)>, address: u64) -> u32 {
        self.frame(SampleFrame {
            function: None,
            name: name.into(),
            file: place.map(|(f, _)| f.to_owned()),
            line: place.map(|(_, l)| l),
            address,
        })
    }

    pub(crate) fn frame(&mut self, frame: SampleFrame) -> u32 {
        let set = &mut self.profile.samples;
        set.frames.push(frame);
        (set.frames.len() - 1) as u32
    }

    /// The stack of `frames`, outermost first (made once).
    pub(crate) fn stack(&mut self, frames: &[u32]) -> u32 {
        let mut parent = None;
        for &frame in frames {
            let stacks = &mut self.profile.samples.stacks;
            let found = stacks
                .iter()
                .position(|s| s.parent == parent && s.frame == frame);
            let id = match found {
                Some(i) => i as u32,
                None => {
                    stacks.push(SampleStack { parent, frame });
                    (stacks.len() - 1) as u32
                }
            };
            parent = Some(id);
        }
        parent.expect("a stack of one frame at least")
    }

    /// A sample of source `source`.
    pub(crate) fn sample(
        &mut self,
        source: u32,
        pid: Option<&str>,
        thread: Option<u32>,
        stack: Option<u32>,
        weight: f64,
        state: Option<WaitState>,
    ) {
        self.profile.samples.samples.push(SampleRecord {
            source,
            pid: pid.map(|p| p.parse::<Pid>().expect("a pid")),
            thread,
            time_ns: 0,
            weight,
            stack,
            state,
            mailbox_len: 0,
            callee: None,
            size: 0,
            live: false,
        });
    }

    /// A CPU sample of source 0.
    pub(crate) fn cpu(&mut self, pid: Option<&str>, thread: u32, stack: u32, weight: f64) {
        self.sample(0, pid, Some(thread), Some(stack), weight, None);
    }

    pub(crate) fn named(&mut self, pid: &str, name: &str) {
        self.profile.processes.push(ProcessRecord {
            pid: pid.parse().expect("a pid"),
            name: Some(name.into()),
            initial_call: String::new(),
            run: 0,
        });
    }
}

/// One process's CPU samples at 100 Hz over one second on two threads: main calls serve and
/// parse, serve calls parse, parse runs native code (`app::checksum`, at two addresses of
/// one line); CPU time outside processes ran an unknown frame.
pub(crate) fn cpu_profile() -> Profile {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t0 = b.thread(101, Some("node-worker"));
    let t1 = b.thread(102, Some("node-worker"));
    let main = b.traced("main", "src/main.rs", 1);
    let serve = b.traced("serve", "src/serve.rs", 10);
    let parse = b.traced("parse", "src/parse.rs", 20);
    let sum_a = b.native("app::checksum", Some(("src/sum.rs", 5)), 0x10);
    let sum_b = b.native("app::checksum", Some(("src/sum.rs", 5)), 0x14);
    let unknown = b.native("", None, 0x99);
    let s_main = b.stack(&[main]);
    let s_serve = b.stack(&[main, serve]);
    let s_parse = b.stack(&[main, serve, parse]);
    let s_sum_a = b.stack(&[main, serve, parse, sum_a]);
    let s_sum_b = b.stack(&[main, serve, parse, sum_b]);
    let s_main_parse = b.stack(&[main, parse]);
    let s_unknown = b.stack(&[unknown]);
    let p = Some("<0.5.0>");
    b.cpu(p, t0, s_main, 1.0);
    b.cpu(p, t0, s_parse, 2.0);
    b.cpu(p, t0, s_sum_a, 3.0);
    b.cpu(p, t0, s_sum_b, 1.0);
    b.cpu(p, t0, s_main_parse, 2.0);
    b.cpu(Some("<0.6.0>"), t1, s_serve, 1.0);
    b.cpu(None, t1, s_unknown, 2.0);
    b.named("<0.5.0>", "server");
    b.profile
}

/// CPU samples at 100 Hz of `serve` in `file` (defined on line 9; the listing fixture's),
/// at lines 10 (2), 12 (5) and 14 (1).
pub(crate) fn cpu_profile_in(file: &str) -> Profile {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(7, None);
    b.traced("serve", file, 9);
    for (line, weight) in [(10, 2.0), (12, 5.0), (14, 1.0)] {
        let frame = b.frame(SampleFrame {
            function: Some(0),
            name: String::new(),
            file: None,
            line: Some(line),
            address: 0,
        });
        let stack = b.stack(&[frame]);
        b.cpu(Some("<0.5.0>"), t, stack, weight);
    }
    b.profile
}

/// Wall samples at 10 Hz for 1 s:/// Wall samples at 10 Hz for 1 s: a server running (2) and waiting in receive (6, 4
/// messages queued), an idle process in receive (2), a client waiting for a call's reply (1).
pub(crate) fn wall_profile(dropped: f64) -> Profile {
    let mut b = Build::new();
    let source = b.source(SamplerKind::Wall, 10, 1, dropped);
    let server = b.traced("server_loop", "src/server.rs", 1);
    let handle = b.traced("handle", "src/server.rs", 9);
    let idle = b.traced("idle", "src/idle.rs", 1);
    let client = b.traced("client", "src/client.rs", 1);
    let s_server = b.stack(&[server]);
    let s_handle = b.stack(&[server, handle]);
    let s_idle = b.stack(&[idle]);
    let s_client = b.stack(&[client]);
    for (pid, stack, weight, state, mailbox) in [
        ("<0.5.0>", s_handle, 2.0, WaitState::Running, 0),
        ("<0.5.0>", s_server, 6.0, WaitState::Receive, 4),
        ("<0.6.0>", s_idle, 2.0, WaitState::Receive, 0),
        ("<0.7.0>", s_client, 1.0, WaitState::Call, 0),
    ] {
        b.sample(source, Some(pid), None, Some(stack), weight, Some(state));
        b.profile
            .samples
            .samples
            .last_mut()
            .expect("a sample")
            .mailbox_len = mailbox;
    }
    b.named("<0.5.0>", "server");
    b.profile
}

/// A traced function whose untraced helper is reached through plumbing, as a worker runs it:
/// a thread's start (std, libc), tokio's worker, the runtime's poll, then `app::crunch`
/// (traced) calling `app::fnv_hash` through std's and tokio's frames; and a tokio worker
/// parked, outside processes; 100 ms apart.
pub(crate) fn plumbed_profile() -> Profile {
    let mut b = Build::new();
    b.source(SamplerKind::Cpu, 100, 1, 0.0);
    let t = b.thread(1, None);
    let start = b.native("start_thread", None, 1);
    let spawn = b.native(
        "std::sys::pal::unix::thread::Thread::new::thread_start",
        Some((
            "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/sys/pal/unix/thread.rs",
            105,
        )),
        2,
    );
    let worker = b.native(
        "tokio::runtime::scheduler::multi_thread::worker::run",
        Some(("/home/me/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.48.0/src/runtime/scheduler/multi_thread/worker.rs", 500)),
        3,
    );
    let poll = b.native("runtime::process::Process::poll", None, 4);
    let crunch = b.traced("crunch", "src/crunch.rs", 3);
    let fold = b.native(
        "core::iter::traits::iterator::Iterator::fold",
        Some((
            "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/iter/traits/iterator.rs",
            2646,
        )),
        5,
    );
    // Unqualified, as DWARF of line-tables-only names it: its file says tokio.
    let coop = b.native(
        "budget<F>",
        Some(("/home/me/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.48.0/src/task/coop.rs", 70)),
        6,
    );
    let hash = b.native("app::fnv_hash", Some(("/home/me/app/src/hash.rs", 9)), 7);
    let park = b.native("tokio::runtime::park::Inner::park", None, 8);
    let hashing = b.stack(&[start, spawn, worker, poll, crunch, fold, coop, hash]);
    let in_fold = b.stack(&[start, spawn, worker, poll, crunch, fold]);
    let parked = b.stack(&[start, spawn, worker, park]);
    b.cpu(Some("<0.5.0>"), t, hashing, 6.0);
    b.cpu(Some("<0.5.0>"), t, in_fold, 2.0);
    b.cpu(None, t, parked, 3.0);
    // One after the other, as the chrome export draws them.
    for (i, s) in b.profile.samples.samples.iter_mut().enumerate() {
        s.time_ns = i as u64 * 100_000_000;
    }
    b.profile
}
