//! Listings of a profile's samples: their stacks as [`LineFrame`]s, a traced function's
//! native frames listed with it, and [`Profile::listing`].

use std::collections::HashMap;

use super::{Column, LineFigures, LineFrame, ListOptions, Listing, ListingError};
use crate::Profile;
use crate::functions::Function;
use crate::samples::{SampleRecord, SampleSet, SamplerKind};

impl LineFigures {
    /// The stacks of `set`'s samples, each with the values `values` gives its samples
    /// (summed by stack first; `None` leaves a sample out): the frames named as the reports
    /// name them, a traced one as `module::name` in its function's file (`functions`, the
    /// profile's function table), at the line it was sampled at, defined at its function's
    /// line. An allocation profile's samples list the same way, with their own columns and
    /// values, say `vec![Column::bytes("alloc_space"), Column::count("alloc_objects")]` and
    /// `|s| Some(vec![bytes_of(s), s.weight])`.
    pub fn of_sample_set(
        set: &SampleSet,
        functions: &[Function],
        columns: Vec<Column>,
        values: impl Fn(&SampleRecord) -> Option<Vec<f64>>,
    ) -> LineFigures {
        let mut out = LineFigures::new(columns);
        let width = out.columns.len();
        // Values by stack, in first-seen order.
        let mut by_stack: HashMap<Option<u32>, usize> = HashMap::new();
        let mut sums: Vec<(Option<u32>, Vec<f64>)> = Vec::new();
        for s in &set.samples {
            let Some(v) = values(s) else { continue };
            let i = *by_stack.entry(s.stack).or_insert_with(|| {
                sums.push((s.stack, vec![0.0; width]));
                sums.len() - 1
            });
            for (sum, v) in sums[i].1.iter_mut().zip(v) {
                *sum += v;
            }
        }
        let traced = TracedByName::new(functions);
        let mut of_frame: Vec<Option<u32>> = vec![None; set.frames.len()];
        let mut stack: Vec<u32> = Vec::new();
        for (s, v) in sums {
            stack.clear();
            for f in s.map(|s| set.frames_of(s)).unwrap_or_default() {
                let id = match of_frame.get(f as usize).copied().flatten() {
                    Some(id) => id,
                    None => {
                        let id = out.frame(traced.merged(line_frame(set, functions, f)));
                        if let Some(slot) = of_frame.get_mut(f as usize) {
                            *slot = Some(id);
                        }
                        id
                    }
                };
                stack.push(id);
            }
            out.stacks.push((stack.clone(), v));
        }
        out
    }

    /// The samples of `profile` of `sampler`: CPU and wall samples in nanoseconds (a sample's
    /// weight times its source's period: column `cpu`, CPU time, or `wall`, wall time summed
    /// over processes); allocation samples as Go's heap columns, `alloc_space`,
    /// `alloc_objects`, `inuse_space` and `inuse_objects` (estimated bytes and allocations,
    /// and those still allocated).
    pub fn of_samples(profile: &Profile, sampler: SamplerKind) -> LineFigures {
        let set = &profile.samples;
        if sampler == SamplerKind::Alloc {
            return LineFigures::of_sample_set(
                set,
                &profile.function_table,
                vec![
                    Column::bytes("alloc_space"),
                    Column::count("alloc_objects"),
                    Column::bytes("inuse_space"),
                    Column::count("inuse_objects"),
                ],
                |s| {
                    let source = set.sources.get(s.source as usize)?;
                    (source.sampler == SamplerKind::Alloc).then(|| {
                        let live = if s.live { 1.0 } else { 0.0 };
                        vec![s.weight, s.objects(), s.weight * live, s.objects() * live]
                    })
                },
            );
        }
        LineFigures::of_sample_set(
            set,
            &profile.function_table,
            vec![Column::nanoseconds(sampler.name())],
            |s| {
                let source = set.sources.get(s.source as usize)?;
                (source.sampler == sampler).then(|| vec![s.weight * source.period_ns()])
            },
        )
    }
}

/// `frame` of `set` as a listing names it.
pub(crate) fn line_frame(set: &SampleSet, functions: &[Function], frame: u32) -> LineFrame {
    let Some(f) = set.frames.get(frame as usize) else {
        return LineFrame {
            function: format!("(frame {frame})"),
            file: None,
            line: None,
            start_line: None,
        };
    };
    match f.function.map(|i| (i, functions.get(i as usize))) {
        Some((_, Some(function))) => LineFrame {
            function: traced_name(function),
            file: Some(function.file.clone()).filter(|f| !f.is_empty()),
            line: f.line.filter(|l| *l > 0),
            start_line: Some(function.line).filter(|l| *l > 0),
        },
        Some((i, None)) => LineFrame {
            function: format!("(function {i})"),
            file: None,
            line: None,
            start_line: None,
        },
        None => LineFrame {
            function: if f.name.is_empty() {
                format!("{:#x}", f.address)
            } else {
                f.name.clone()
            },
            file: f.file.clone().filter(|f| !f.is_empty()),
            line: f.line.filter(|l| *l > 0),
            start_line: None,
        },
    }
}

/// The traced functions by name (`module::name`), so that a native frame of one (sampled as
/// it was entered or left, before its traced frame was on the stack or after it was gone),
/// or of a closure in its body, lists with it.
pub(crate) struct TracedByName<'a> {
    by_name: HashMap<String, &'a Function>,
}

impl<'a> TracedByName<'a> {
    /// The functions of `functions` (a profile's function table).
    pub(crate) fn new(functions: &'a [Function]) -> Self {
        let by_name = functions
            .iter()
            .filter(|f| !f.file.is_empty())
            .map(|f| (traced_name(f), f))
            .collect();
        TracedByName { by_name }
    }

    /// `frame`, as its traced function's frame when it is a native frame of it, or of a
    /// closure in it (`module::name::{{closure}}`), in the same file (the native frame's path
    /// ends with the function's).
    pub(crate) fn merged(&self, frame: LineFrame) -> LineFrame {
        if frame.start_line.is_some() {
            return frame;
        }
        let mut name = frame.function.as_str();
        while let Some(outer) = name.strip_suffix("::{{closure}}") {
            name = outer;
        }
        let Some(function) = self.by_name.get(name) else {
            return frame;
        };
        let same_file = frame
            .file
            .as_deref()
            .is_some_and(|file| std::path::Path::new(file).ends_with(&function.file));
        if !same_file {
            return frame;
        }
        LineFrame {
            function: name.to_owned(),
            file: Some(function.file.clone()),
            line: frame.line,
            start_line: Some(function.line).filter(|l| *l > 0),
        }
    }
}

/// A traced function's name in listings: `module::name`.
fn traced_name(function: &Function) -> String {
    if function.module.is_empty() {
        function.name.clone()
    } else {
        format!("{}::{}", function.module, function.name)
    }
}

impl Profile {
    /// The annotated source listing of the functions whose name `pattern` matches (a regular
    /// expression, matched anywhere in `module::function`), from the profile's samples: see
    /// the [`listing`](crate::listing) module.
    ///
    /// ```
    /// use tprof::{Function, Profile, TraceType};
    ///
    /// let mut profile = Profile::empty(TraceType::CallCount);
    /// profile.function_table = vec![Function {
    ///     module: "app".into(), name: "work".into(), arity: 0,
    ///     file: "no/such/app.rs".into(), line: 7,
    /// }];
    /// // CPU samples at 100 Hz: `app::work` (function 0) sampled 3 times at its line 9.
    /// profile.samples = serde_json::from_value(serde_json::json!({
    ///     "sources": [{ "run": 0, "node": 0, "sampler": "cpu", "hz": 100, "dropped": 0.0,
    ///                   "native_walked": true, "duration_ns": 1_000_000_000u64, "capacity": 1000 }],
    ///     "frames": [{ "function": 0, "line": 9 }],
    ///     "stacks": [{ "parent": null, "frame": 0 }],
    ///     "samples": [{ "source": 0, "time_ns": 0, "weight": 3.0, "stack": 0 }],
    ///     "threads": [], "mappings": [],
    /// }))
    /// .unwrap();
    ///
    /// let listing = profile.listing("app::work").unwrap();
    /// assert_eq!(
    ///     listing.to_string().lines().last(),
    ///     Some("      30ms       30ms      9"),
    /// );
    /// assert!(profile.listing("app::rest").is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// As [`LineFigures::listing`], and [`ListingError::NoSamples`] for a profile without
    /// samples (of the sampler asked for).
    pub fn listing(&self, pattern: &str) -> Result<Listing, ListingError> {
        self.listing_with(pattern, &ListOptions::new())
    }

    /// [`listing`](Self::listing) with `options`.
    ///
    /// # Errors
    ///
    /// As [`listing`](Self::listing).
    pub fn listing_with(
        &self,
        pattern: &str,
        options: &ListOptions,
    ) -> Result<Listing, ListingError> {
        let has = |k: SamplerKind| self.samples.sources.iter().any(|s| s.sampler == k);
        let sampler = match options.sampler {
            Some(k) if has(k) => k,
            Some(_) => return Err(ListingError::NoSamples),
            None if has(SamplerKind::Cpu) => SamplerKind::Cpu,
            None if has(SamplerKind::Wall) => SamplerKind::Wall,
            None if has(SamplerKind::Alloc) => SamplerKind::Alloc,
            None => return Err(ListingError::NoSamples),
        };
        LineFigures::of_samples(self, sampler).listing(pattern, options)
    }
}
