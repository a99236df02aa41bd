//! A listing as text, laid out as `go tool pprof -list` lays it out, and values written as
//! pprof writes them.

use std::collections::HashSet;
use std::fmt;

use super::{Column, Listing, Routine, SourceState, Unit};

/// `value` (rounded to a whole number first, as pprof's values are) as pprof writes it with
/// its default output unit (`minimum`): scaled to the largest unit it is at least one of,
/// with two decimals, `.00` left out: `10ms`, `2.90s`, `1.50MB`, `512B`; a count as the
/// number alone, `3`.
///
/// ```
/// use tprof::listing::{Unit, scaled_label};
///
/// assert_eq!(scaled_label(2.9e9, Unit::Nanoseconds), "2.90s");
/// assert_eq!(scaled_label(10_000_000.0, Unit::Nanoseconds), "10ms");
/// assert_eq!(scaled_label(1536.0, Unit::Bytes), "1.50kB");
/// assert_eq!(scaled_label(3.0, Unit::Count), "3");
/// ```
pub fn scaled_label(value: f64, unit: Unit) -> String {
    let value = value.round();
    if value < 0.0 {
        return format!("-{}", scaled_label(-value, unit));
    }
    let scales: &[(f64, &str)] = match unit {
        Unit::Nanoseconds => &[
            (1.0, "ns"),
            (1e3, "us"),
            (1e6, "ms"),
            (1e9, "s"),
            (3.6e12, "hrs"),
        ],
        Unit::Bytes => &[
            (1.0, "B"),
            (1024.0, "kB"),
            (1048576.0, "MB"),
            (1073741824.0, "GB"),
            (1099511627776.0, "TB"),
            (1125899906842624.0, "PB"),
        ],
        Unit::Count => &[],
    };
    let (scaled, suffix) = match scales.iter().rev().find(|(f, _)| value / f >= 1.0) {
        Some((factor, suffix)) => (value / factor, *suffix),
        // Under one of the smallest unit: pprof falls back on the default unit (seconds for
        // time, bytes for memory), which writes 0 for the only such value, 0.
        None => (value, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.strip_suffix(".00").unwrap_or(&text);
    if text == "0" || text == "-0" {
        return "0".to_owned();
    }
    format!("{text}{suffix}")
}

/// `value` of `total` as pprof's `Percentage` writes it: `96.88%`, `  100%`, `  0.5%`.
pub(super) fn percentage(value: f64, total: f64) -> String {
    let ratio = if total != 0.0 {
        (value / total).abs() * 100.0
    } else {
        0.0
    };
    if (99.95..=100.05).contains(&ratio) {
        "  100%".to_owned()
    } else if ratio >= 1.0 {
        format!("{ratio:5.2}%")
    } else {
        format!("{:>5}%", go_g2(ratio))
    }
}

/// `x` (0 or more) as Go's `%.2g`: two significant digits, no trailing zeros, an exponent
/// (two digits at least) under 1e-4.
fn go_g2(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    let sci = format!("{x:.1e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if !(-4..2).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        let decimals = usize::try_from(1 - exp).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
    }
}

/// The values of `columns`, each as [`scaled_label`] right-aligned in 10; with `dots`, `.`
/// for 0 (a line's, as pprof writes them; a header's zero is `0`).
fn cells(columns: &[Column], flat: &[f64], cum: &[f64], dots: bool) -> String {
    let shown = |v: f64, unit: Unit| {
        if dots {
            value_or_dot(v, unit)
        } else {
            scaled_label(v, unit)
        }
    };
    let mut out = String::new();
    for (i, c) in columns.iter().enumerate() {
        let f = flat.get(i).copied().unwrap_or(0.0);
        let k = cum.get(i).copied().unwrap_or(0.0);
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&format!(
            "{:>10} {:>10}",
            shown(f, c.unit),
            shown(k, c.unit)
        ));
    }
    out
}

fn value_or_dot(v: f64, unit: Unit) -> String {
    if v.round() == 0.0 {
        ".".to_owned()
    } else {
        scaled_label(v, unit)
    }
}

/// `values` of `columns`: the one value alone, or each followed by its column's name.
fn amounts(columns: &[Column], values: &[f64]) -> String {
    if columns.len() == 1 {
        return scaled_label(values.first().copied().unwrap_or(0.0), columns[0].unit);
    }
    columns
        .iter()
        .zip(values)
        .map(|(c, v)| format!("{} {}", scaled_label(*v, c.unit), c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Routine {
    /// Writes the routine; `told` holds the files already said to be unreadable.
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        listing: &Listing,
        told: &mut HashSet<String>,
    ) -> fmt::Result {
        let columns = &listing.columns;
        let Some(file) = &self.file else {
            return writeln!(f, "No source information for {}", self.function);
        };
        writeln!(
            f,
            "ROUTINE ======================== {} in {file}",
            self.function
        )?;
        let names = if columns.len() == 1 {
            "(flat, cum)".to_owned()
        } else {
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            format!("(flat, cum: {})", names.join(", "))
        };
        writeln!(
            f,
            "{} {names} {} of Total",
            cells(columns, &self.flat, &self.cum, false),
            percentage(
                self.cum.first().copied().unwrap_or(0.0),
                listing.totals.first().copied().unwrap_or(0.0)
            )
        )?;
        if let SourceState::Missing(reason) = &self.source
            && told.insert(file.clone())
        {
            writeln!(
                f,
                " Source not found: {file}: {reason}; the figures are given by line number"
            )?;
        }
        if let Some((line, values)) = &self.at_definition {
            writeln!(
                f,
                " Note: {} of it came with no line of its own: shown on line {line}, where it \
                 is defined",
                amounts(columns, values)
            )?;
        }
        if let Some(no_line) = &self.no_line {
            writeln!(
                f,
                " Note: {} of it came with no line at all",
                amounts(columns, &no_line.cum)
            )?;
        }
        for line in &self.lines {
            let cells = cells(columns, &line.flat, &line.cum, true);
            match &line.text {
                Some(text) => writeln!(f, "{cells} {:>6}:{text}", line.line)?,
                None => writeln!(f, "{cells} {:>6}", line.line)?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Total: {}", amounts(&self.columns, &self.totals))?;
        let mut told = HashSet::new();
        for routine in &self.routines {
            routine.write(f, self, &mut told)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_as_pprof_writes_them() {
        assert_eq!(scaled_label(0.0, Unit::Nanoseconds), "0");
        assert_eq!(scaled_label(999.0, Unit::Nanoseconds), "999ns");
        assert_eq!(scaled_label(1500.0, Unit::Nanoseconds), "1.50us");
        assert_eq!(scaled_label(3e9, Unit::Nanoseconds), "3s");
        assert_eq!(scaled_label(7.2e12, Unit::Nanoseconds), "2hrs");
        assert_eq!(scaled_label(512.0, Unit::Bytes), "512B");
        assert_eq!(scaled_label(3.0 * 1048576.0, Unit::Bytes), "3MB");
        assert_eq!(scaled_label(2.5, Unit::Count), "3");
        assert_eq!(scaled_label(1234.0, Unit::Count), "1234");
    }

    #[test]
    fn percentages_are_written_as_pprof_writes_them() {
        assert_eq!(percentage(1.0, 1.0), "  100%");
        assert_eq!(percentage(31.0, 32.0), "96.88%");
        assert_eq!(percentage(1.0, 20.0), " 5.00%");
        assert_eq!(percentage(1.0, 200.0), "  0.5%");
        assert_eq!(percentage(1.0, 1900.0), "0.053%");
        assert_eq!(percentage(0.0, 10.0), "    0%");
        assert_eq!(percentage(1.0, 1e7), "1e-05%");
    }
}
