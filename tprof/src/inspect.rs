//! `inspect`: a raw profile turned into per-process (or total) lines with per-call figures and
//! percentages, sorted by a column.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use crate::choice::{OptionError, choose};
use crate::profile::{FunctionTrace, Group, Profile, TraceType};

/// A column to sort by (tprof's `column()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Column {
    /// The module path.
    Module,
    /// The function, then its arity.
    Function,
    /// Calls.
    Calls,
    /// The measurement (calls, time or words).
    Measurement,
    /// The measurement per call.
    MeasurementPerCall,
    /// The share of the group's total.
    #[default]
    Percent,
}

/// Ascending or descending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Smallest first.
    #[default]
    Ascending,
    /// Largest first: the ascending order reversed, as tprof does (ties come out in reverse).
    Descending,
}

/// How to sort lines (tprof's `sort_by()`); the default is by percent, ascending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SortBy {
    /// The column.
    pub column: Column,
    /// The direction.
    pub direction: Direction,
}

impl SortBy {
    /// Ascending by `column`.
    pub fn ascending(column: Column) -> SortBy {
        SortBy {
            column,
            direction: Direction::Ascending,
        }
    }

    /// Descending by `column`.
    pub fn descending(column: Column) -> SortBy {
        SortBy {
            column,
            direction: Direction::Descending,
        }
    }
}

impl From<Column> for SortBy {
    fn from(column: Column) -> SortBy {
        SortBy::ascending(column)
    }
}

impl std::str::FromStr for Column {
    type Err = OptionError;
    /// tprof's names: `module`, `function`, `calls`, `measurement`, `measurement_per_call`,
    /// `percent`.
    fn from_str(s: &str) -> Result<Column, OptionError> {
        choose(
            s,
            "column",
            "module, function, calls, measurement, measurement_per_call or percent",
            &[
                ("module", Column::Module),
                ("function", Column::Function),
                ("calls", Column::Calls),
                ("measurement", Column::Measurement),
                ("measurement_per_call", Column::MeasurementPerCall),
                ("percent", Column::Percent),
            ],
        )
    }
}

impl std::str::FromStr for Direction {
    type Err = OptionError;
    /// `ascending` or `descending`.
    fn from_str(s: &str) -> Result<Direction, OptionError> {
        choose(
            s,
            "direction",
            "ascending or descending",
            &[
                ("ascending", Direction::Ascending),
                ("descending", Direction::Descending),
            ],
        )
    }
}

impl std::str::FromStr for Aggregate {
    type Err = OptionError;
    /// `process` or `total`, as tprof's `inspect/3` groups.
    fn from_str(s: &str) -> Result<Aggregate, OptionError> {
        choose(
            s,
            "group by",
            "process or total",
            &[("process", Aggregate::Process), ("total", Aggregate::Total)],
        )
    }
}

/// Per process, or all processes together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Aggregate {
    /// One group per process (call_count has only the `all` group).
    #[default]
    Process,
    /// One group for all processes.
    Total,
}

/// One function in an inspected group (tprof's `profile_line()`).
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// The module path.
    pub module: String,
    /// The function.
    pub function: String,
    /// Its arity.
    pub arity: u8,
    /// Calls.
    pub calls: u64,
    /// The measurement: calls, nanoseconds or words.
    pub measurement: u64,
    /// The measurement per call; 0.0 for no calls.
    pub per_call: f64,
    /// The share of the group's total, in percent; 0.0 when the total is 0.
    pub percent: f64,
}

/// One group's lines and total (tprof's `profile_result()`).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupProfile {
    /// What was measured.
    pub trace_type: TraceType,
    /// The sum of the measurement over the lines.
    pub total: u64,
    /// The functions, sorted.
    pub lines: Vec<Line>,
}

/// An inspected profile: per group (a process, or `all`), its lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inspected {
    /// The groups, in pid order.
    pub groups: BTreeMap<Group, GroupProfile>,
    /// Calls made outside any process that the groups leave out (see
    /// [`Profile::outside_in_tables`]); [`format`](crate::format()) says so after the tables.
    pub outside_left_out: u64,
    /// The groups that hold calls made outside any process (with
    /// [`Profile::outside_in_tables`]), which [`format`](crate::format()) heads as such.
    pub outside: std::collections::BTreeSet<Group>,
    /// call_time: how long the program's threads ran and waited on the OS's run queue while
    /// it was profiled ([`Profile::run_queue`]); [`format`](crate::format()) says after the
    /// tables that the times include those waits when they are a large share
    /// ([`RUN_QUEUE_NOTE_SHARE`](crate::RUN_QUEUE_NOTE_SHARE)). `None` for other profiles.
    pub run_queue: Option<runtime::trace::SnapshotRunQueue>,
}

impl Inspected {
    /// The group of `pid`.
    pub fn process(&self, pid: runtime::Pid) -> Option<&GroupProfile> {
        self.groups.get(&Group::Process(pid))
    }

    /// The `all` group ([`Aggregate::Total`], or call_count).
    pub fn all(&self) -> Option<&GroupProfile> {
        self.groups.get(&Group::All)
    }
}

fn divide(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// Keeps what tprof's `collect` keeps: call_memory lines that allocated something.
fn shown(trace_type: TraceType, measurement: u64, calls: u64) -> bool {
    match trace_type {
        TraceType::CallMemory => measurement > 0,
        TraceType::CallCount => calls > 0,
        TraceType::CallTime => true,
    }
}

/// tprof's `inspect(Profile, Aggregate, SortBy)`: per process (or in total), each function's
/// calls, measurement, measurement per call and share of the group's total, sorted.
///
/// call_count has one group, `all`. Functions of a call_memory profile that allocated
/// nothing are left out, as tprof's `collect` leaves them out (the raw [`Profile`] keeps
/// them). The calls made outside any process ([`OUTSIDE_PROCESSES`](crate::OUTSIDE_PROCESSES))
/// are left out too, and counted in [`Inspected::outside_left_out`], unless
/// [`Profile::outside_in_tables`] is set: they are then groups of their own, in every
/// aggregate (never part of `all`).
///
/// ```
/// use tprof::{Aggregate, Column, Entry, FunctionTrace, Group, Profile, SortBy, TraceType};
/// # #[runtime::traced] fn f() {}
/// # let callsite = runtime::trace::callsites().iter().find(|c| c.function() == "f").unwrap();
/// let profile = Profile::new(
///     TraceType::CallCount,
///     vec![FunctionTrace {
///         function: callsite.into(),
///         entries: vec![Entry { group: Group::All, calls: 4, measurement: 4, bytes: 0, blocks: 0 }],
///     }],
/// );
/// let inspected = tprof::inspect(&profile, Aggregate::Process, SortBy::default());
/// let all = inspected.all().unwrap();
/// assert_eq!(all.total, 4);
/// assert_eq!(all.lines[0].percent, 100.0);
/// ```
pub fn inspect(profile: &Profile, aggregate: Aggregate, sort: SortBy) -> Inspected {
    let mut inspected =
        inspect_impl(profile, aggregate, sort, false, profile.outside_in_tables).into_owned();
    if profile.trace_type == TraceType::CallTime {
        inspected.run_queue = profile.run_queue();
    }
    inspected
}

/// [`inspect`], keeping the functions that allocated nothing and the calls made outside
/// processes (for tables and assertions), its lines borrowing their functions' names.
pub(crate) fn inspect_keeping_zeros(
    profile: &Profile,
    aggregate: Aggregate,
    sort: SortBy,
) -> Borrowed<'_> {
    inspect_impl(profile, aggregate, sort, true, true)
}

/// A [`Line`] that borrows its function (its names copied only into an [`Inspected`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineOf<'a> {
    pub(crate) function: &'a FunctionTrace,
    pub(crate) calls: u64,
    pub(crate) measurement: u64,
    pub(crate) per_call: f64,
    pub(crate) percent: f64,
}

impl LineOf<'_> {
    fn to_line(self) -> Line {
        Line {
            module: self.function.module().to_owned(),
            function: self.function.function().to_owned(),
            arity: self.function.arity(),
            calls: self.calls,
            measurement: self.measurement,
            per_call: self.per_call,
            percent: self.percent,
        }
    }
}

/// A [`GroupProfile`] of [`LineOf`]s.
#[derive(Debug)]
pub(crate) struct GroupOf<'a> {
    pub(crate) trace_type: TraceType,
    pub(crate) total: u64,
    pub(crate) lines: Vec<LineOf<'a>>,
}

/// An [`Inspected`] of [`LineOf`]s.
#[derive(Debug)]
pub(crate) struct Borrowed<'a> {
    pub(crate) groups: BTreeMap<Group, GroupOf<'a>>,
    outside_left_out: u64,
    outside: std::collections::BTreeSet<Group>,
}

impl Borrowed<'_> {
    /// The inspection with its lines' names copied.
    fn into_owned(self) -> Inspected {
        Inspected {
            groups: self
                .groups
                .into_iter()
                .map(|(group, g)| {
                    let lines = g.lines.into_iter().map(LineOf::to_line).collect();
                    let profile = GroupProfile {
                        trace_type: g.trace_type,
                        total: g.total,
                        lines,
                    };
                    (group, profile)
                })
                .collect(),
            outside_left_out: self.outside_left_out,
            outside: self.outside,
            run_queue: None,
        }
    }
}

fn inspect_impl(
    profile: &Profile,
    aggregate: Aggregate,
    sort: SortBy,
    zeros: bool,
    outside: bool,
) -> Borrowed<'_> {
    let trace_type = profile.trace_type;
    let shown = |t, m, c| zeros || shown(t, m, c);
    let aggregate = if trace_type == TraceType::CallCount {
        Aggregate::Total
    } else {
        aggregate
    };
    let mut groups = Groups::default();
    let mut outside_left_out = 0u64;
    let outside_pids = profile.outside_pids();
    let is_outside =
        |group: Group| matches!(group, Group::Process(pid) if outside_pids.contains(&pid));
    match aggregate {
        Aggregate::Process => {
            for f in &profile.functions {
                for e in &f.entries {
                    if !shown(trace_type, e.measurement, e.calls) {
                        continue;
                    }
                    if is_outside(e.group) && !outside {
                        outside_left_out = outside_left_out.saturating_add(e.calls);
                        continue;
                    }
                    add_line(&mut groups, trace_type, f, e);
                }
            }
        }
        Aggregate::Total => {
            let mut lines = Vec::new();
            let mut total = 0u64;
            for f in &profile.functions {
                let mut in_processes = Vec::new();
                for e in &f.entries {
                    if !shown(trace_type, e.measurement, e.calls) {
                        continue;
                    }
                    if !is_outside(e.group) {
                        in_processes.push(e);
                    } else if outside {
                        // A group of its own, never part of `all`.
                        add_line(&mut groups, trace_type, f, e);
                    } else {
                        outside_left_out = outside_left_out.saturating_add(e.calls);
                    }
                }
                let (calls, measurement) = in_processes.iter().fold((0u64, 0u64), |(c, m), e| {
                    (c.saturating_add(e.calls), m.saturating_add(e.measurement))
                });
                if calls == 0 && measurement == 0 {
                    continue;
                }
                total = total.saturating_add(measurement);
                lines.push(LineOf {
                    function: f,
                    calls,
                    measurement,
                    per_call: divide(measurement as f64, calls as f64),
                    percent: 0.0,
                });
            }
            if !lines.is_empty() {
                groups.insert(
                    Group::All,
                    GroupOf {
                        trace_type,
                        total,
                        lines,
                    },
                );
            }
        }
    }
    let mut groups = groups.into_map();
    for group in groups.values_mut() {
        let total = group.total as f64;
        for line in &mut group.lines {
            line.percent = divide(line.measurement as f64 * 100.0, total);
        }
        sort_by(&mut group.lines, sort);
    }
    Borrowed {
        outside: groups.keys().copied().filter(|g| is_outside(*g)).collect(),
        groups,
        outside_left_out,
    }
}

/// The groups being inspected, found by hash (a lookup per entry in a map of 100,000
/// processes ordered by pid took most of an inspection), ordered once at the end.
#[derive(Default)]
struct Groups<'a> {
    index: HashMap<Group, usize>,
    groups: Vec<(Group, GroupOf<'a>)>,
}

impl<'a> Groups<'a> {
    fn insert(&mut self, group: Group, profile: GroupOf<'a>) {
        match self.index.get(&group) {
            Some(&i) => self.groups[i].1 = profile,
            None => {
                self.index.insert(group, self.groups.len());
                self.groups.push((group, profile));
            }
        }
    }

    /// The groups in order (a map built from sorted keys at once).
    fn into_map(mut self) -> BTreeMap<Group, GroupOf<'a>> {
        self.groups.sort_unstable_by_key(|(g, _)| *g);
        self.groups.into_iter().collect()
    }
}

/// Adds entry `e` of function `f` as a line of its own group.
fn add_line<'a>(
    groups: &mut Groups<'a>,
    trace_type: TraceType,
    f: &'a FunctionTrace,
    e: &crate::profile::Entry,
) {
    let i = *groups.index.entry(e.group).or_insert_with(|| {
        groups.groups.push((
            e.group,
            GroupOf {
                trace_type,
                total: 0,
                lines: Vec::new(),
            },
        ));
        groups.groups.len() - 1
    });
    let group = &mut groups.groups[i].1;
    group.total = group.total.saturating_add(e.measurement);
    group.lines.push(LineOf {
        function: f,
        calls: e.calls,
        measurement: e.measurement,
        per_call: divide(e.measurement as f64, e.calls as f64),
        percent: 0.0,
    });
}

/// What lines are sorted by.
trait Sorted {
    fn module(&self) -> &str;
    fn function(&self) -> &str;
    fn arity(&self) -> u8;
    fn calls(&self) -> u64;
    fn measurement(&self) -> u64;
    fn per_call(&self) -> f64;
    fn percent(&self) -> f64;
}

impl Sorted for Line {
    fn module(&self) -> &str {
        &self.module
    }
    fn function(&self) -> &str {
        &self.function
    }
    fn arity(&self) -> u8 {
        self.arity
    }
    fn calls(&self) -> u64 {
        self.calls
    }
    fn measurement(&self) -> u64 {
        self.measurement
    }
    fn per_call(&self) -> f64 {
        self.per_call
    }
    fn percent(&self) -> f64 {
        self.percent
    }
}

impl Sorted for LineOf<'_> {
    fn module(&self) -> &str {
        self.function.module()
    }
    fn function(&self) -> &str {
        self.function.function()
    }
    fn arity(&self) -> u8 {
        self.function.arity()
    }
    fn calls(&self) -> u64 {
        self.calls
    }
    fn measurement(&self) -> u64 {
        self.measurement
    }
    fn per_call(&self) -> f64 {
        self.per_call
    }
    fn percent(&self) -> f64 {
        self.percent
    }
}

/// Sorts `lines` as tprof does: a stable ascending sort, reversed for descending.
pub fn sort_lines(lines: &mut [Line], sort: SortBy) {
    sort_by(lines, sort);
}

/// [`sort_lines`], of any kind of line.
fn sort_by<L: Sorted>(lines: &mut [L], sort: SortBy) {
    let key = |a: &L, b: &L| -> Ordering {
        match sort.column {
            Column::Module => a.module().cmp(b.module()),
            Column::Function => (a.function(), a.arity()).cmp(&(b.function(), b.arity())),
            Column::Calls => a.calls().cmp(&b.calls()),
            Column::Measurement => a.measurement().cmp(&b.measurement()),
            Column::MeasurementPerCall => a.per_call().total_cmp(&b.per_call()),
            Column::Percent => a.percent().total_cmp(&b.percent()),
        }
    };
    lines.sort_by(key);
    if sort.direction == Direction::Descending {
        lines.reverse();
    }
}
