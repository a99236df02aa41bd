//! Many processes in one page: past [`KEEP`] processes, a trace profile's page keeps the
//! [`KEEP`] largest (by their value) one by one and sums the others by registered name and
//! initial call, each such sum a row of the page standing for its processes (`app::worker/1
//! (99,521 processes)`), as the svg and speedscope exports group them. The page then holds a
//! few hundred processes' stacks and rows whatever the profile's count (the call_time page of
//! 100,000 processes was 12 MB), while its totals, its sums by name and by initial call
//! (which count every process) and its flame graph of every process are those of the whole
//! profile; a summed process's own rows, percentiles and timeline are left out, and the page
//! says so, naming the exports that keep every process.
//!
//! Linear in the processes, stacks and rows (hashing), plus sorting the summed ones.

use std::borrow::Cow;
use std::collections::HashMap;

use super::{Figures, Lists, PercentilesView, ProcessView, TimelineView, ViewData};
use crate::samples::thousands;

/// How many processes a page keeps one by one (the viewer's menu lists as many).
pub(super) const KEEP: usize = 200;

/// What the summed processes are grouped by: their registered name and initial call.
type Key = (Option<String>, String);

/// A process of the page: one of the profile's (by its index there), or the sum of many.
enum Shown {
    Kept,
    Summed {
        name: Option<String>,
        initial_call: String,
        members: u64,
        run: Option<u32>,
    },
}

/// The page's lists, with the processes past the largest [`KEEP`] summed.
struct Summed<'a> {
    inner: Box<dyn Lists + 'a>,
    /// The page's processes, in its order: the kept ones in the profile's order, then the
    /// sums, by name and initial call.
    shown: Vec<Shown>,
    /// Each of the profile's processes' index in `shown`.
    to: Vec<usize>,
    /// The stacks and rows, each process's in the profile's order, the sums' summed.
    stacks: Vec<Figures>,
    rows: Vec<Figures>,
}

/// `data`, with its processes past the largest [`KEEP`] summed by name and initial call;
/// `data` as it is when it has at most that many processes. Returns the sentence that says
/// what was summed, if anything was.
pub(super) fn summarise(mut data: ViewData<'_>) -> (ViewData<'_>, Option<String>) {
    let lists = &*data.lists;
    let mut count = 0usize;
    let mut all = Vec::new();
    lists.processes(&mut |p| {
        if p.id == "all" {
            all.push(count);
        }
        count += 1;
    });
    if count <= KEEP {
        return (data, None);
    }
    // Each process's value, and the largest KEEP of them (ties: the earlier), with `all`.
    let mut value = vec![0u64; count];
    lists.stacks(&mut |s| {
        if let Some(v) = value.get_mut(s.process) {
            *v = v.saturating_add(s.value);
        }
    });
    let mut order: Vec<usize> = (0..count).collect();
    let key = |&i: &usize| (std::cmp::Reverse(value[i]), i);
    order.select_nth_unstable_by_key(KEEP - 1, key);
    let mut kept = vec![false; count];
    for &i in order[..KEEP].iter().chain(&all) {
        kept[i] = true;
    }
    drop(order);
    // The others, by name and initial call, each group once.
    let mut shown: Vec<Shown> = Vec::new();
    let mut to = vec![usize::MAX; count];
    let mut groups: HashMap<Key, Vec<usize>> = HashMap::new();
    let mut runs: Vec<Option<u32>> = vec![None; count];
    let mut at = 0usize;
    lists.processes(&mut |p| {
        if kept[at] {
            to[at] = shown.len();
            shown.push(Shown::Kept);
        } else {
            let key = (
                p.name.as_deref().map(str::to_owned),
                p.initial_call.to_string(),
            );
            groups.entry(key).or_default().push(at);
            runs[at] = p.run;
        }
        at += 1;
    });
    let mut groups: Vec<(Key, Vec<usize>)> = groups.into_iter().collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let summed_processes = count - shown.len();
    let summed_groups = groups.len();
    for ((name, initial_call), members) in groups {
        let first_run = runs[members[0]];
        let run = first_run.filter(|_| members.iter().all(|&m| runs[m] == first_run));
        for &m in &members {
            to[m] = shown.len();
        }
        shown.push(Shown::Summed {
            name,
            initial_call,
            members: members.len() as u64,
            run,
        });
    }
    let stacks = merged(&to, &kept, |each| lists.stacks(each), |f| f.path);
    let rows = merged(
        &to,
        &kept,
        |each| lists.rows(each),
        |f| f.function.map_or(-1, |x| x as i64),
    );
    let sentence = format!(
        "The {KEEP} largest of {} processes are shown one by one; the other {} are summed by \
         registered name and initial call into {} row{} (their own tables, percentiles and \
         timelines left out: tprof report --format pretty, folded or pprof has every process)",
        thousands(count as u64),
        thousands(summed_processes as u64),
        thousands(summed_groups as u64),
        if summed_groups == 1 { "" } else { "s" },
    );
    let inner = std::mem::replace(&mut data.lists, Box::new(Empty));
    data.lists = Box::new(Summed {
        inner,
        shown,
        to,
        stacks,
        rows,
    });
    (data, Some(sentence))
}

/// The figures `list` gives, each kept process's as they are (its index changed), the
/// others' summed per page process and `key` (a path, a function), after them.
fn merged(
    to: &[usize],
    kept: &[bool],
    list: impl FnOnce(&mut dyn FnMut(&Figures)),
    key: impl Fn(&Figures) -> i64,
) -> Vec<Figures> {
    let mut out: Vec<Figures> = Vec::new();
    let mut sums: HashMap<(usize, i64), Figures> = HashMap::new();
    list(&mut |f| {
        let Some(&process) = to.get(f.process) else {
            return;
        };
        if kept[f.process] {
            out.push(Figures { process, ..*f });
            return;
        }
        let sum = sums.entry((process, key(f))).or_insert(Figures {
            process,
            calls: 0,
            value: 0,
            total: f.total.map(|_| 0),
            words: f.words.map(|_| 0),
            bytes: 0,
            blocks: 0,
            ..*f
        });
        sum.calls = sum.calls.saturating_add(f.calls);
        sum.value = sum.value.saturating_add(f.value);
        sum.total = sum.total.map(|t| t.saturating_add(f.total.unwrap_or(0)));
        sum.words = sum.words.map(|w| w.saturating_add(f.words.unwrap_or(0)));
        sum.bytes = sum.bytes.saturating_add(f.bytes);
        sum.blocks = sum.blocks.saturating_add(f.blocks);
    });
    let mut sums: Vec<((usize, i64), Figures)> = sums.into_iter().collect();
    sums.sort_unstable_by_key(|&(key, _)| key);
    out.extend(sums.into_iter().map(|(_, f)| f));
    out
}

/// No lists: what stands in for the inner lists while they are moved.
struct Empty;

impl Lists for Empty {
    fn processes(&self, _: &mut dyn FnMut(&ProcessView<'_>)) {}
    fn stacks(&self, _: &mut dyn FnMut(&Figures)) {}
    fn rows(&self, _: &mut dyn FnMut(&Figures)) {}
    fn percentiles(&self, _: &mut dyn FnMut(&PercentilesView)) {}
    fn timelines(&self, _: &mut dyn FnMut(&TimelineView)) {}
}

impl Lists for Summed<'_> {
    fn processes(&self, each: &mut dyn FnMut(&ProcessView<'_>)) {
        // The kept ones come first, in the profile's order.
        let mut at = 0usize;
        self.inner.processes(&mut |p| {
            if matches!(self.shown.get(self.to[at]), Some(Shown::Kept)) {
                each(p);
            }
            at += 1;
        });
        for shown in &self.shown {
            if let Shown::Summed {
                name,
                initial_call,
                members,
                run,
            } = shown
            {
                let what = match (name, initial_call.as_str()) {
                    (Some(name), "") => name.clone(),
                    (Some(name), call) => format!("{name} {call}"),
                    (None, "") => "(no initial call)".to_owned(),
                    (None, call) => call.to_owned(),
                };
                let label = format!("{what} ({} processes)", thousands(*members));
                each(&ProcessView {
                    id: Cow::Owned(label.clone()),
                    label: Cow::Owned(label),
                    name: name.as_deref().map(Cow::Borrowed),
                    initial_call: Cow::Borrowed(initial_call),
                    run: *run,
                    members: *members,
                });
            }
        }
    }

    fn stacks(&self, each: &mut dyn FnMut(&Figures)) {
        self.stacks.iter().for_each(each);
    }

    fn rows(&self, each: &mut dyn FnMut(&Figures)) {
        self.rows.iter().for_each(each);
    }

    fn percentiles(&self, each: &mut dyn FnMut(&PercentilesView)) {
        self.inner.percentiles(&mut |q| {
            if let Some(&process) = self.to.get(q.process)
                && matches!(self.shown.get(process), Some(Shown::Kept))
            {
                each(&PercentilesView { process, ..*q });
            }
        });
    }

    fn timelines(&self, each: &mut dyn FnMut(&TimelineView)) {
        self.inner.timelines(&mut |t| {
            if let Some(&process) = self.to.get(t.process)
                && matches!(self.shown.get(process), Some(Shown::Kept))
            {
                each(&TimelineView {
                    process,
                    dropped: t.dropped,
                    frames: t.frames.clone(),
                });
            }
        });
    }
}
