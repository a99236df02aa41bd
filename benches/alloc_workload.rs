//! The allocation-heavy actor workload of the benches `alloc_sampling` and `alloc_dhat`.

use std::hint::black_box;

use runtime::{receive, self_pid, send};

/// A worker: answers each message (a vector) with a boxed sum and a string, until told to stop.
async fn worker() {
    loop {
        let (from, data): (runtime::Pid, Vec<u8>) = receive().await;
        if data.is_empty() {
            return;
        }
        let text = format!("{}:{}", data.len(), data[0]);
        let sum: Box<u64> = Box::new(data.iter().map(|b| u64::from(*b)).sum());
        send(from, (text, sum));
    }
}

/// The workload: 8 workers, 20,000 messages of 8 to 512 bytes, each answered.
pub(crate) async fn workload() {
    let me = self_pid();
    let workers: Vec<runtime::Pid> = (0..8)
        .map(|_| runtime::spawn(worker()).expect("spawn"))
        .collect();
    const MESSAGES: usize = 20_000;
    const IN_FLIGHT: usize = 64;
    let mut sent = 0;
    let mut answered = 0;
    while answered < MESSAGES {
        while sent < MESSAGES && sent - answered < IN_FLIGHT {
            let size = 8 << (sent % 7);
            send(
                workers[sent % workers.len()],
                (me, vec![sent as u8 | 1; size]),
            );
            sent += 1;
        }
        let (text, sum): (String, Box<u64>) = receive().await;
        black_box((text, sum));
        answered += 1;
    }
    for w in workers {
        send(w, (me, Vec::<u8>::new()));
    }
}
