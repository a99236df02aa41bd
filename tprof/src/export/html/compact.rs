//! The viewer's data as the page embeds it: rows as arrays rather than objects, each call
//! path once (a table of `[parent, function]` shared by every process), each initial call
//! once, and the processes summed by registered name and by initial call. A profile of
//! 100,000 processes gives a page a browser parses in a second, its long lists written as
//! they are read, never held whole.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;
use serde::ser::Serializer;

use super::{Figures, ViewData};

/// Processes summed over a key: `[key, processes, calls, value]`, largest value first.
type Aggregate = (Option<String>, u64, u64, u64);

/// The processes summed by registered name (`null`: processes without one) and by initial
/// call.
#[derive(Serialize)]
struct Aggregates {
    by_name: Vec<Aggregate>,
    by_initial_call: Vec<Aggregate>,
}

/// A flat row as written: `[process, function, calls, value, words, bytes, blocks]`, and
/// `total` in sampled profiles.
struct Row<'a>(&'a Figures);

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
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
                [a, b, c, d, e, f, g, total].serialize(serializer)
            }
            None => head.serialize(serializer),
        }
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

/// Distinct texts, each given a number in the order first seen.
#[derive(Default)]
struct Texts {
    list: Vec<String>,
    index: HashMap<String, usize>,
}

impl Texts {
    fn of(&mut self, text: &str) -> usize {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        self.list.push(text.to_owned());
        self.index.insert(text.to_owned(), self.list.len() - 1);
        self.list.len() - 1
    }
}

/// The processes summed by a key, one of `keys` (numbered) per process (`None`: no key),
/// largest value first (then by key).
fn aggregate(
    keys: &Texts,
    key: impl Fn(&Process) -> Option<usize>,
    processes: &[Process],
) -> Vec<Aggregate> {
    let mut sums: HashMap<Option<usize>, (u64, u64, u64)> = HashMap::new();
    for p in processes {
        let sum = sums.entry(key(p)).or_default();
        sum.0 += p.members;
        sum.1 = sum.1.saturating_add(p.calls);
        sum.2 = sum.2.saturating_add(p.value);
    }
    let mut out: Vec<Aggregate> = sums
        .into_iter()
        .map(|(k, (n, c, v))| (k.map(|k| keys.list[k].clone()), n, c, v))
        .collect();
    out.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| a.0.cmp(&b.0)));
    out
}

/// What the page sums of a process before it writes it: its registered name and its initial
/// call (numbered), and the calls of its rows (the samples of its stacks, sampled) and the
/// value of its stacks.
struct Process {
    /// How many of the profile's processes it stands for.
    members: u64,
    name: Option<usize>,
    initial_call: usize,
    calls: u64,
    value: u64,
}

/// A JSON array written an item at a time; the first error is kept, and the items after it
/// are not written.
struct Array<'w, W: Write> {
    out: &'w mut W,
    first: bool,
    failed: Option<serde_json::Error>,
}

impl<'w, W: Write> Array<'w, W> {
    /// Writes `"key":[`.
    fn open(out: &'w mut W, key: &str) -> serde_json::Result<Array<'w, W>> {
        write!(out, ",\"{key}\":[").map_err(serde_json::Error::io)?;
        Ok(Array {
            out,
            first: true,
            failed: None,
        })
    }

    fn item(&mut self, item: &impl Serialize) {
        if self.failed.is_some() {
            return;
        }
        let comma = if self.first { &b""[..] } else { b"," };
        self.first = false;
        let written = self
            .out
            .write_all(comma)
            .map_err(serde_json::Error::io)
            .and_then(|()| serde_json::to_writer(&mut *self.out, item));
        self.failed = written.err();
    }

    /// Writes `]`.
    fn close(self) -> serde_json::Result<()> {
        match self.failed {
            Some(e) => Err(e),
            None => self.out.write_all(b"]").map_err(serde_json::Error::io),
        }
    }
}

/// Writes `,"key":` and `value` as JSON.
fn field<W: Write>(out: &mut W, key: &str, value: &impl Serialize) -> serde_json::Result<()> {
    write!(out, ",\"{key}\":").map_err(serde_json::Error::io)?;
    serde_json::to_writer(out, value)
}

/// Writes `data` as the page embeds it to `out` (as JSON, unescaped: see [`Escaped`]), its
/// long lists as they are given ([`super::Lists`]): the keys in the order the module's
/// documentation lists them.
pub(super) fn write(data: &ViewData<'_>, out: &mut dyn Write) -> serde_json::Result<()> {
    let lists = &*data.lists;
    // What the processes are summed by, and their sums.
    let mut names = Texts::default();
    let mut initial_calls = Texts::default();
    let mut processes: Vec<Process> = Vec::new();
    lists.processes(&mut |p| {
        processes.push(Process {
            members: p.members,
            name: p.name.as_deref().map(|n| names.of(n)),
            initial_call: initial_calls.of(&p.initial_call),
            calls: 0,
            value: 0,
        });
    });
    // A process's samples are those of its stacks: a row counts the samples with its frame
    // anywhere on their stack, so the rows of a process count a sample once per frame.
    let sampled = data.samples.is_some();
    let mut total = 0u64;
    lists.stacks(&mut |s| {
        if let Some(p) = processes.get_mut(s.process) {
            p.value = p.value.saturating_add(s.value);
            if sampled {
                p.calls = p.calls.saturating_add(s.calls);
            }
        }
        total = total.saturating_add(s.value);
    });
    if !sampled {
        lists.rows(&mut |r| {
            if let Some(p) = processes.get_mut(r.process) {
                p.calls = p.calls.saturating_add(r.calls);
            }
        });
    }
    let aggregates = Aggregates {
        by_name: aggregate(&names, |p| p.name, &processes),
        by_initial_call: aggregate(&initial_calls, |p| Some(p.initial_call), &processes),
    };
    let mut out = io::BufWriter::with_capacity(1 << 16, Escaped(out));
    let out = &mut out;
    write!(out, "{{\"version\":2").map_err(serde_json::Error::io)?;
    field(out, "trace_type", &data.trace_type)?;
    field(out, "unit", &data.unit)?;
    field(out, "call_tree", &data.call_tree)?;
    field(out, "runs", &data.runs)?;
    field(out, "functions", &data.functions)?;
    field(out, "initial_calls", &initial_calls.list)?;
    // `[id, label (null: the id), name, initial call (index into initial_calls), run]`.
    let mut array = Array::open(out, "processes")?;
    let mut calls = processes.iter();
    lists.processes(&mut |p| {
        let call = calls.next().map_or(0, |c| c.initial_call);
        let label = (p.label != p.id).then_some(&*p.label);
        let item = (&*p.id, label, p.name.as_deref(), call, p.run);
        if p.members == 1 {
            array.item(&item);
        } else {
            array.item(&(item.0, item.1, item.2, item.3, item.4, p.members));
        }
    });
    array.close()?;
    drop(processes);
    // `[parent (-1: none), function]`.
    field(out, "paths", &data.paths.list)?;
    // `[process, path (-1: no frame), calls, value, bytes, blocks]`.
    let mut array = Array::open(out, "stacks")?;
    lists.stacks(&mut |s| array.item(&(s.process, s.path, s.calls, s.value, s.bytes, s.blocks)));
    array.close()?;
    let mut array = Array::open(out, "rows")?;
    lists.rows(&mut |r| array.item(&Row(r)));
    array.close()?;
    // `[process, function, calls, p50_ns, p90_ns, p99_ns, max_ns]`.
    let mut array = Array::open(out, "percentiles")?;
    lists.percentiles(&mut |q| {
        array.item(&[
            q.process as u64,
            q.function as u64,
            q.calls,
            q.p50_ns,
            q.p90_ns,
            q.p99_ns,
            q.max_ns,
        ]);
    });
    array.close()?;
    field(out, "aggregates", &aggregates)?;
    field(out, "total", &total)?;
    let mut array = Array::open(out, "timelines")?;
    lists.timelines(&mut |t| array.item(t));
    array.close()?;
    if let Some(samples) = &data.samples {
        field(out, "samples", samples)?;
    }
    if let Some(listings) = &data.listings {
        field(out, "listings", listings)?;
    }
    if let Some(note) = &data.note {
        field(out, "note", note)?;
    }
    out.write_all(b"}").map_err(serde_json::Error::io)?;
    out.flush().map_err(serde_json::Error::io)
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
