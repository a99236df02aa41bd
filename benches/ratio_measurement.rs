//! A criterion measurement of ratios in percent, for rows that time a subject and its
//! baseline back to back in each sample (see `messaging/ratio.rs`), shared by the benches that
//! have such rows.

use criterion::Throughput;
use criterion::measurement::{Measurement, ValueFormatter};

/// A criterion measurement of ratios, in percent: rows use `iter_custom` and return the
/// percentage times the number of operations (`start` and `end` are never used).
pub(crate) struct Ratio;

impl Measurement for Ratio {
    type Intermediate = ();
    type Value = f64;

    fn start(&self) {}

    fn end(&self, (): ()) -> f64 {
        0.0
    }

    fn add(&self, v1: &f64, v2: &f64) -> f64 {
        v1 + v2
    }

    fn zero(&self) -> f64 {
        0.0
    }

    fn to_f64(&self, value: &f64) -> f64 {
        *value
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &Percent
    }
}

/// Prints a [`Ratio`] value as a percentage of the baseline.
struct Percent;

impl ValueFormatter for Percent {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "% of the baseline"
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        _throughput: &Throughput,
        _values: &mut [f64],
    ) -> &'static str {
        "% of the baseline"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "%"
    }
}
