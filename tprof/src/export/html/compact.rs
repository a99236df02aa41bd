//! The viewer's data as the page embeds it: rows as arrays rather than objects, each call
//! path once (a table of `[parent, function]` shared by every process), each initial call
//! once, and the processes summed by registered name and by initial call. A profile of
//! 100,000 processes gives a page a browser parses in a second, written in one pass.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use super::{Figures, FunctionEntry, ProcessView, TimelineView, ViewData};
use crate::{Run, TraceType};

/// Processes summed over a key: `[key, processes, calls, value]`, largest value first.
type Aggregate = (Option<String>, u64, u64, u64);

/// A process as written: `[id, label, name, initial call, run]`.
type ProcessRow<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    usize,
    Option<u32>,
);

/// The processes summed by registered name (`null`: processes without one) and by initial
/// call.
#[derive(Serialize)]
struct Aggregates {
    by_name: Vec<Aggregate>,
    by_initial_call: Vec<Aggregate>,
}

/// The page's data, as written.
#[derive(Serialize)]
struct Page<'a> {
    version: u32,
    trace_type: TraceType,
    unit: &'static str,
    call_tree: bool,
    runs: &'a [Run],
    functions: &'a [FunctionEntry<'a>],
    initial_calls: Vec<&'a str>,
    /// `[id, label (null: the id), name, initial call (index into initial_calls), run]`.
    processes: Vec<ProcessRow<'a>>,
    /// `[parent (-1: none), function]`.
    paths: &'a [(i64, usize)],
    /// `[process, path (-1: no frame), calls, value, bytes, blocks]`.
    stacks: Vec<(usize, i64, u64, u64, u64, u64)>,
    /// `[process, function, calls, value, words, bytes, blocks]`, and `total` in sampled
    /// profiles.
    rows: Rows<'a>,
    /// `[process, function, calls, p50_ns, p90_ns, p99_ns, max_ns]`.
    percentiles: Vec<[u64; 7]>,
    aggregates: Aggregates,
    total: u64,
    timelines: &'a [TimelineView],
    #[serde(skip_serializing_if = "Option::is_none")]
    samples: Option<&'a super::sampled::SamplesView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    listings: Option<&'a super::sampled::ListingsView>,
}

/// The flat rows, each written as an array.
struct Rows<'a>(&'a [Figures]);

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for r in self.0 {
            let head = [
                r.process as u64,
                r.function.unwrap_or_default() as u64,
                r.calls,
                r.value,
                r.words.unwrap_or_default(),
                r.bytes,
                r.blocks,
            ];
            match r.total {
                Some(total) => {
                    let [a, b, c, d, e, f, g] = head;
                    seq.serialize_element(&[a, b, c, d, e, f, g, total])?;
                }
                None => seq.serialize_element(&head)?,
            }
        }
        seq.end()
    }
}

/// Gives each distinct call path (a list of function indices, outermost first) one index in
/// a table of `[parent, function]`.
#[derive(Default)]
pub(super) struct Paths {
    list: Vec<(i64, usize)>,
    index: HashMap<(i64, usize), usize>,
}

impl Paths {
    /// The path of `frames` (-1 for none).
    pub(super) fn of(&mut self, frames: &[usize]) -> i64 {
        let mut at: i64 = -1;
        for &f in frames {
            let next = *self.index.entry((at, f)).or_insert_with(|| {
                self.list.push((at, f));
                self.list.len() - 1
            });
            at = next as i64;
        }
        at
    }
}

/// The processes summed by `key`, largest value first (then by key).
fn aggregate<'a>(
    processes: &'a [ProcessView],
    key: impl Fn(&'a ProcessView) -> Option<&'a str>,
    calls: &[u64],
    values: &[u64],
) -> Vec<Aggregate> {
    let mut sums: HashMap<Option<&str>, (u64, u64, u64)> = HashMap::new();
    for (i, p) in processes.iter().enumerate() {
        let sum = sums.entry(key(p)).or_default();
        sum.0 += 1;
        sum.1 = sum.1.saturating_add(calls[i]);
        sum.2 = sum.2.saturating_add(values[i]);
    }
    let mut out: Vec<Aggregate> = sums
        .into_iter()
        .map(|(k, (n, c, v))| (k.map(str::to_owned), n, c, v))
        .collect();
    out.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Writes `data` as the page embeds it to `out` (as JSON, unescaped: see [`Escaped`]).
pub(super) fn write(data: &ViewData<'_>, out: &mut dyn Write) -> serde_json::Result<()> {
    let mut initial_calls: Vec<&str> = Vec::new();
    let mut call_index: HashMap<&str, usize> = HashMap::new();
    let processes = data
        .processes
        .iter()
        .map(|p| {
            let call = *call_index
                .entry(p.initial_call.as_str())
                .or_insert_with(|| {
                    initial_calls.push(p.initial_call.as_str());
                    initial_calls.len() - 1
                });
            let label = (p.label != p.id).then_some(p.label.as_str());
            (p.id.as_str(), label, p.name.as_deref(), call, p.run)
        })
        .collect();
    let mut calls = vec![0u64; data.processes.len()];
    let mut values = vec![0u64; data.processes.len()];
    let stacks = data
        .stacks
        .iter()
        .map(|s| {
            values[s.process] = values[s.process].saturating_add(s.value);
            (s.process, s.path, s.calls, s.value, s.bytes, s.blocks)
        })
        .collect();
    for r in &data.rows {
        calls[r.process] = calls[r.process].saturating_add(r.calls);
    }
    let aggregates = Aggregates {
        by_name: aggregate(&data.processes, |p| p.name.as_deref(), &calls, &values),
        by_initial_call: aggregate(
            &data.processes,
            |p| Some(p.initial_call.as_str()),
            &calls,
            &values,
        ),
    };
    let percentiles = data
        .percentiles
        .iter()
        .map(|q| {
            [
                q.process as u64,
                q.function as u64,
                q.calls,
                q.p50_ns,
                q.p90_ns,
                q.p99_ns,
                q.max_ns,
            ]
        })
        .collect();
    let page = Page {
        version: 2,
        trace_type: data.trace_type,
        unit: data.unit,
        call_tree: data.call_tree,
        runs: data.runs,
        functions: &data.functions,
        initial_calls,
        processes,
        paths: &data.paths.list,
        stacks,
        rows: Rows(&data.rows),
        percentiles,
        aggregates,
        total: data.total,
        timelines: &data.timelines,
        samples: data.samples.as_ref(),
        listings: data.listings.as_ref(),
    };
    let mut buffered = io::BufWriter::with_capacity(1 << 16, Escaped(out));
    serde_json::to_writer(&mut buffered, &page)?;
    buffered.flush().map_err(serde_json::Error::io)
}

/// Writes JSON safe inside a `<script>` element: `<`, `>` and `&` as `\u` escapes. They can
/// only occur inside JSON strings, where the escapes read back as the same characters.
pub(super) struct Escaped<'a>(pub(super) &'a mut dyn Write);

impl Write for Escaped<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut start = 0;
        for (i, b) in buf.iter().enumerate() {
            let escape: &[u8] = match b {
                b'<' => b"\\u003c",
                b'>' => b"\\u003e",
                b'&' => b"\\u0026",
                _ => continue,
            };
            self.0.write_all(&buf[start..i])?;
            self.0.write_all(escape)?;
            start = i + 1;
        }
        self.0.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
