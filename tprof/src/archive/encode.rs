//! Writing an archive: the strings and functions are interned first, then each table is written
//! as sections of about [`CHUNK`] bytes, each sent to the output as soon as it is full.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::{self, Write};

use crc32fast::Hasher;

use super::{ArchiveError, CHUNK, MAGIC, MAX_SECTION_LEN, limits, samples, tag, trace_type_code};
use crate::{EventKind, Function, Group, Profile};

/// Appends `v` as a varint.
pub(super) fn varint(buf: &mut Vec<u8>, v: u64) {
    leb128::write::unsigned(buf, v).expect("writing to a Vec cannot fail");
}

/// Appends a group: 0 for all, else the pid's node + 1, index and serial.
fn group(buf: &mut Vec<u8>, g: Group) {
    match g {
        Group::All => varint(buf, 0),
        Group::Process(pid) => {
            varint(buf, u64::from(pid.node()) + 1);
            varint(buf, pid.index().into());
            varint(buf, pid.serial().into());
        }
    }
}

/// Distinct values in the order they were first seen, each with its index.
pub(super) struct Interner<'p, T: ?Sized> {
    index: HashMap<&'p T, u64>,
    order: Vec<&'p T>,
}

impl<'p, T: ?Sized + Eq + Hash> Interner<'p, T> {
    fn new() -> Self {
        Interner {
            index: HashMap::new(),
            order: Vec::new(),
        }
    }

    fn intern(&mut self, v: &'p T) {
        if !self.index.contains_key(v) {
            self.index.insert(v, self.order.len() as u64);
            self.order.push(v);
        }
    }

    /// The index of `v`, which was interned.
    pub(super) fn at(&self, v: &T) -> u64 {
        self.index
            .get(v)
            .copied()
            .expect("every string and function is interned before the sections are written")
    }
}

/// The output, with the checksum of everything written to it.
pub(super) struct Out<'w> {
    inner: &'w mut dyn Write,
    crc: Hasher,
}

impl Out<'_> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.crc.update(bytes);
        Ok(())
    }

    /// Writes one section: tag, length, payload, CRC.
    fn section(&mut self, tag: u64, payload: &[u8]) -> io::Result<()> {
        let mut header = Vec::with_capacity(20);
        varint(&mut header, tag);
        varint(&mut header, payload.len() as u64);
        let mut crc = Hasher::new();
        crc.update(&header);
        crc.update(payload);
        self.put(&header)?;
        self.put(payload)?;
        self.put(&crc.finalize().to_le_bytes())
    }
}

/// Writes `items` as the records of a table of sections tagged `tag`, each written by
/// `record`, starting a new section after about [`CHUNK`] bytes.
pub(super) fn table<I: IntoIterator>(
    out: &mut Out<'_>,
    tag: u64,
    items: I,
    mut record: impl FnMut(&mut Vec<u8>, I::Item),
) -> Result<(), ArchiveError> {
    let mut buf = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let start = buf.len();
        record(&mut buf, item);
        let len = (buf.len() - start) as u64;
        if len > MAX_SECTION_LEN {
            return Err(ArchiveError::TooLarge {
                what: format!(
                    "record {i} of the {} section takes {len} bytes, more than the \
                     {MAX_SECTION_LEN} a section can hold",
                    tag::name(tag).unwrap_or("unknown")
                ),
                len,
                limit: MAX_SECTION_LEN,
            });
        }
        if buf.len() as u64 > MAX_SECTION_LEN {
            out.section(tag, buf.get(..start).unwrap_or_default())?;
            buf.drain(..start);
        }
        if buf.len() >= CHUNK {
            out.section(tag, &buf)?;
            buf.clear();
        }
    }
    if !buf.is_empty() {
        out.section(tag, &buf)?;
    }
    Ok(())
}

/// Writes `profile` to `out`: see the layout in [`super`].
pub(super) fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), ArchiveError> {
    let mut strings: Interner<'_, str> = Interner::new();
    let mut functions: Interner<'_, Function> = Interner::new();
    let every_function = profile
        .functions
        .iter()
        .map(|f| &f.function)
        .chain(profile.percentiles.iter().map(|p| &p.function))
        .chain(&profile.function_table);
    for f in every_function {
        functions.intern(f);
        strings.intern(&f.module);
        strings.intern(&f.name);
        strings.intern(&f.file);
    }
    for run in &profile.meta.runs {
        strings.intern(&run.program);
    }
    for p in &profile.processes {
        if let Some(name) = &p.name {
            strings.intern(name);
        }
        strings.intern(&p.initial_call);
    }
    for s in samples::strings(&profile.samples) {
        strings.intern(s);
    }
    if let Some(long) = strings
        .order
        .iter()
        .find(|s| s.len() as u64 > MAX_SECTION_LEN - 10)
    {
        return Err(ArchiveError::TooLarge {
            what: format!(
                "the string `{}…` takes {} bytes, more than the {} a section can hold",
                long.chars().take(40).collect::<String>().escape_debug(),
                long.len(),
                MAX_SECTION_LEN - 10
            ),
            len: long.len() as u64,
            limit: MAX_SECTION_LEN - 10,
        });
    }
    if let Some(what) = samples::contradiction(&profile.samples, profile.function_table.len()) {
        return Err(ArchiveError::Inconsistent { what });
    }
    limits::check_writable(profile, &functions.order)?;

    let mut out = Out {
        inner: out,
        crc: Hasher::new(),
    };
    out.put(MAGIC)?;
    out.put(&super::version_for(profile).to_le_bytes())?;
    let mut meta = Vec::new();
    varint(&mut meta, trace_type_code(profile.trace_type));
    out.section(tag::META, &meta)?;

    table(&mut out, tag::STRINGS, &strings.order, |b, s| {
        varint(b, s.len() as u64);
        b.extend_from_slice(s.as_bytes());
    })?;
    table(&mut out, tag::FUNCTIONS, &functions.order, |b, f| {
        varint(b, strings.at(&f.module));
        varint(b, strings.at(&f.name));
        varint(b, f.arity.into());
        varint(b, strings.at(&f.file));
        varint(b, f.line.into());
    })?;
    table(
        &mut out,
        tag::FUNCTION_TABLE,
        &profile.function_table,
        |b, f| {
            varint(b, functions.at(f));
        },
    )?;
    table(&mut out, tag::RUNS, &profile.meta.runs, |b, run| {
        varint(b, strings.at(&run.program));
        varint(b, run.started_unix_ms);
        varint(b, run.duration_ns);
        varint(b, run.nodes.len() as u64);
        for &node in &run.nodes {
            varint(b, node.into());
        }
    })?;
    table(&mut out, tag::PROCESSES, &profile.processes, |b, p| {
        group(b, Group::Process(p.pid));
        varint(b, p.name.as_deref().map_or(0, |name| strings.at(name) + 1));
        varint(b, strings.at(&p.initial_call));
        varint(b, p.run.into());
    })?;
    table(&mut out, tag::TRACES, &profile.functions, |b, f| {
        varint(b, functions.at(&f.function));
        varint(b, f.entries.len() as u64);
    })?;
    let entries = profile.functions.iter().flat_map(|f| &f.entries);
    table(&mut out, tag::ENTRIES, entries, |b, e| {
        group(b, e.group);
        varint(b, e.calls);
        varint(b, e.measurement);
        varint(b, e.bytes);
        varint(b, e.blocks);
    })?;
    let all = profile.percentiles.iter().filter(|p| p.group == Group::All);
    table(&mut out, tag::PERCENTILES, all, |b, p| {
        varint(b, functions.at(&p.function));
        varint(b, p.calls);
        varint(b, p.p50_ns);
        varint(b, p.p90_ns);
        varint(b, p.p99_ns);
        varint(b, p.max_ns);
    })?;
    table(
        &mut out,
        tag::TREE_NODES,
        &profile.call_tree.nodes,
        |b, n| {
            varint(b, n.parent.map_or(0, |p| u64::from(p) + 1));
            varint(b, n.function.into());
        },
    )?;
    table(
        &mut out,
        tag::TREE_ENTRIES,
        &profile.call_tree.entries,
        |b, e| {
            group(b, e.group);
            varint(b, e.node.into());
            varint(b, e.calls);
            varint(b, e.measurement);
            varint(b, e.bytes);
            varint(b, e.blocks);
        },
    )?;
    table(&mut out, tag::EVENT_LOGS, &profile.event_logs, |b, log| {
        group(b, log.group);
        varint(b, log.dropped);
        varint(b, log.events.len() as u64);
    })?;
    let events = profile.event_logs.iter().flat_map(|log| {
        let mut previous = 0u64;
        log.events.iter().map(move |e| {
            let delta = e.ts_ns.wrapping_sub(previous);
            previous = e.ts_ns;
            (delta, e)
        })
    });
    table(&mut out, tag::EVENTS, events, |b, (delta, e)| {
        varint(b, delta);
        let kind = match e.kind {
            EventKind::Enter => 0,
            EventKind::Leave => 1,
        };
        varint(b, u64::from(e.function) << 1 | kind);
    })?;
    let per_process = profile.percentiles.iter().filter(|p| p.group != Group::All);
    table(&mut out, tag::PROCESS_PERCENTILES, per_process, |b, p| {
        group(b, p.group);
        varint(b, functions.at(&p.function));
        varint(b, p.calls);
        varint(b, p.p50_ns);
        varint(b, p.p90_ns);
        varint(b, p.p99_ns);
        varint(b, p.max_ns);
    })?;
    let run_queues = profile.meta.runs.iter().enumerate();
    let run_queues = run_queues.filter_map(|(i, r)| Some((i, r.run_queue?)));
    table(&mut out, tag::RUN_QUEUE, run_queues, |b, (i, q)| {
        varint(b, i as u64);
        varint(b, q.ran_ns);
        varint(b, q.waited_ns);
        varint(b, q.threads.into());
        varint(b, q.exited.into());
    })?;
    samples::write(&mut out, &profile.samples, &strings)?;

    let whole = out.crc.clone().finalize();
    out.section(tag::END, &whole.to_le_bytes())?;
    out.inner.flush()?;
    Ok(())
}
