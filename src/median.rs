//! The median and quantiles of a list of measurements: how the autotuner, the benchmarks, the
//! speed-up measurements and the app's frame clock summarise repeated timings.

/// The median of `values` (mean of the middle two for an even count; NaN for none).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// The `q` quantile of sorted values (nearest rank).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n => sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1],
    }
}
