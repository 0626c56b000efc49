//! Figures a benchmark may not have got: a missing one prints as `n/a`
//! and is written as JSON `null`, never as 0, which would read as a
//! measurement.

#![allow(dead_code)]

use serde_json::Value;

/// A number of a JSON report, if it was measured.
pub fn get(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// RSS growth per item. `None` when RSS could not be read (0) or did not
/// grow: noise, not a size.
pub fn per_item(before: u64, after: u64, n: usize) -> Option<f64> {
    (before > 0 && after > before && n > 0).then(|| (after - before) as f64 / n as f64)
}

/// Items per second; `None` for no items or no measurable time.
pub fn rate(n: usize, seconds: f64) -> Option<f64> {
    (n > 0 && seconds > 0.0).then(|| n as f64 / seconds)
}

/// `ours / reference`, when both were measured.
pub fn ratio(ours: Option<f64>, reference: Option<f64>) -> Option<f64> {
    match (ours, reference) {
        (Some(ours), Some(reference)) if reference > 0.0 => Some(ours / reference),
        _ => None,
    }
}

/// Right-aligned in `width` with `precision` decimals, or `n/a`.
pub fn show(x: Option<f64>, width: usize, precision: usize) -> String {
    match x {
        Some(x) => format!("{x:>width$.precision$}"),
        None => format!("{:>width$}", "n/a"),
    }
}
