//! The median of a list of measurements: how the autotuner, the benchmarks and the speed-up
//! measurements summarise repeated timings (it ignores the outliers of a shared machine).

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
