//! A listing's figures: one pass over the stacks, each frame's figures to its function's line
//! (each stack once per line and once per function), then each function's lines with their
//! source.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::source::Sources;
use super::{Figures, LineFigures, ListOptions, ListedLine, Listing, Routine, SourceState};
use crate::functions::index32;

impl LineFigures {
    /// The listing of the functions of the frames `matched` says (per frame).
    pub(super) fn listing_of(&self, matched: &[bool], options: &ListOptions) -> Listing {
        let width = self.columns.len();
        // Each matched frame's routine (by function and file) and place in it.
        let mut routine_ids: HashMap<(&str, Option<&str>), u32> = HashMap::new();
        let mut sums: Vec<((&str, Option<&str>), Sums)> = Vec::new();
        let of_frame: Vec<Option<(u32, Place)>> = self
            .frames
            .iter()
            .zip(matched)
            .map(|(frame, &matched)| {
                if !matched {
                    return None;
                }
                let key = (frame.function.as_str(), frame.file.as_deref());
                let id = *routine_ids.entry(key).or_insert_with(|| {
                    sums.push((key, Sums::new(width)));
                    index32(sums.len() - 1)
                });
                if let Some(start) = frame.start_line {
                    let routine = &mut sums[id as usize].1;
                    routine.start_line = Some(routine.start_line.map_or(start, |s| s.min(start)));
                }
                let place = match (frame.line, frame.start_line) {
                    (Some(line), _) => Place::Line(line),
                    (None, Some(start)) => Place::Definition(start),
                    (None, None) => Place::Nowhere,
                };
                Some((id, place))
            })
            .collect();
        let mut totals = vec![0.0; width];
        let mut seen_routines: HashSet<u32> = HashSet::new();
        let mut seen_places: HashSet<(u32, Place)> = HashSet::new();
        for (stack, values) in &self.stacks {
            add_to(&mut totals, values);
            seen_routines.clear();
            seen_places.clear();
            for (depth, &f) in stack.iter().enumerate() {
                let Some((id, place)) = of_frame.get(f as usize).copied().flatten() else {
                    continue;
                };
                let routine = &mut sums[id as usize].1;
                let leaf = depth + 1 == stack.len();
                if seen_routines.insert(id) {
                    add_to(&mut routine.cum, values);
                }
                if leaf {
                    add_to(&mut routine.flat, values);
                }
                let line = routine
                    .places
                    .entry(place)
                    .or_insert_with(|| (vec![0.0; width], vec![0.0; width]));
                if leaf {
                    add_to(&mut line.0, values);
                }
                if seen_places.insert((id, place)) {
                    add_to(&mut line.1, values);
                    if matches!(place, Place::Definition(_)) {
                        add_to(&mut routine.at_definition, values);
                    }
                }
            }
        }
        sums.sort_by(|a, b| a.0.cmp(&b.0));
        let mut sources = Sources::new(options.source_root.clone());
        let routines = sums
            .into_iter()
            .map(|((function, file), sums)| sums.routine(function, file, &mut sources))
            .collect();
        Listing {
            columns: self.columns.clone(),
            totals,
            routines,
        }
    }
}

fn add_to(sum: &mut [f64], values: &[f64]) {
    for (s, v) in sum.iter_mut().zip(values) {
        *s += v;
    }
}

/// Where a frame's figures go in its function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Place {
    /// Its own line.
    Line(u32),
    /// The function's definition line: the frame had no line of its own.
    Definition(u32),
    /// Nowhere: neither is known.
    Nowhere,
}

/// One function's figures being summed.
struct Sums {
    flat: Vec<f64>,
    cum: Vec<f64>,
    at_definition: Vec<f64>,
    start_line: Option<u32>,
    /// (flat, cum) per place.
    places: BTreeMap<Place, (Vec<f64>, Vec<f64>)>,
}

impl Sums {
    fn new(width: usize) -> Sums {
        Sums {
            flat: vec![0.0; width],
            cum: vec![0.0; width],
            at_definition: vec![0.0; width],
            start_line: None,
            places: BTreeMap::new(),
        }
    }

    /// The function's routine: its lines' figures, and the source lines around them.
    fn routine(self, function: &str, file: Option<&str>, sources: &mut Sources) -> Routine {
        let width = self.flat.len();
        // Figures per line number (a definition-line place adds to its line's).
        let mut by_line: BTreeMap<u32, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        let mut nowhere = None;
        for (place, (flat, cum)) in self.places {
            let line = match place {
                Place::Line(l) | Place::Definition(l) => l,
                Place::Nowhere => {
                    nowhere = Some(Figures { flat, cum });
                    continue;
                }
            };
            let slot = by_line
                .entry(line)
                .or_insert_with(|| (vec![0.0; width], vec![0.0; width]));
            add_to(&mut slot.0, &flat);
            add_to(&mut slot.1, &cum);
        }
        let source = match file {
            None => SourceState::NoFile,
            Some(file) => sources.state(file),
        };
        let lines = match (&source, by_line.keys().next(), by_line.keys().next_back()) {
            (SourceState::Read, Some(&first), Some(&last)) => {
                // From its definition (or its first line with figures, if that comes before:
                // a traced function's attribute), else a few lines before its first.
                let start = match self.start_line {
                    Some(s) => s.min(first).max(1),
                    None => first.saturating_sub(CONTEXT).max(1),
                };
                let end = last.saturating_add(CONTEXT);
                let text = file.and_then(|f| sources.lines(f)).unwrap_or(&[]);
                let mut lines: Vec<ListedLine> = (start..=end)
                    .map_while(|n| {
                        let text = text.get(n as usize - 1)?;
                        let (flat, cum) = by_line
                            .remove(&n)
                            .unwrap_or_else(|| (vec![0.0; width], vec![0.0; width]));
                        Some(ListedLine {
                            line: n,
                            text: Some(text.clone()),
                            flat,
                            cum,
                        })
                    })
                    .collect();
                // Lines past the end of the file (a file changed since): by number.
                lines.extend(by_line.into_iter().map(|(n, (flat, cum))| ListedLine {
                    line: n,
                    text: None,
                    flat,
                    cum,
                }));
                lines
            }
            _ => by_line
                .into_iter()
                .map(|(n, (flat, cum))| ListedLine {
                    line: n,
                    text: None,
                    flat,
                    cum,
                })
                .collect(),
        };
        let at_definition = self
            .start_line
            .filter(|_| self.at_definition.iter().any(|v| *v != 0.0))
            .map(|line| (line, self.at_definition));
        Routine {
            function: function.to_owned(),
            file: file.map(str::to_owned),
            flat: self.flat,
            cum: self.cum,
            source,
            lines,
            at_definition,
            no_line: nowhere,
        }
    }
}

/// Lines shown before a function's first line with figures (when its definition line is
/// not known) and after its last, as pprof.
const CONTEXT: u32 = 5;
