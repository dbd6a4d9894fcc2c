//! Inception Score: `exp(E_x KL(p(y|x) || p(y)))` per split of the samples, mean and standard
//! deviation over splits, from a classifier's logits (softmax in f64) or probabilities.

use super::check_rows;
use crate::{Error, Result};

/// The number of splits of the original Inception Score code.
pub const IS_SPLITS: usize = 10;

/// A classifier's outputs, row-major `n x classes`.
#[derive(Clone, Copy, Debug)]
pub enum Predictions<'a> {
    /// Unnormalised log-probabilities (softmax is taken in f64, max-shifted).
    Logits(&'a [f32]),
    /// Probabilities: each row non-negative and summing to 1 within 1e-3 (rows are
    /// renormalised in f64).
    Probabilities(&'a [f32]),
}

/// The Inception Score of `n` samples' class predictions: the samples are cut into `splits`
/// consecutive parts (`k n / splits .. (k + 1) n / splits`, as in the original code); for each,
/// `exp(mean_x KL(p(y|x) || p(y)))` with `p(y)` the part's mean prediction (`0 log 0 = 0`);
/// returns the mean and population standard deviation over parts. It lies between 1 (every
/// prediction the same) and `classes` (confident and evenly spread over the classes).
pub fn inception_score(predictions: Predictions, classes: usize, splits: usize) -> Result<(f64, f64)> {
    let (values, logits) = match predictions {
        Predictions::Logits(v) => (v, true),
        Predictions::Probabilities(v) => (v, false),
    };
    let what = if logits { "IS logits" } else { "IS probabilities" };
    let rows = check_rows(what, values, classes, 1, "the Inception Score")?;
    if splits == 0 || splits > rows.n {
        return Err(Error::metrics(
            "IS",
            format!(
                "{splits} splits of {} samples; use between 1 and {} (the usual is {IS_SPLITS})",
                rows.n, rows.n
            ),
        ));
    }
    // log p(y|x) per row, in f64; -inf marks p = 0.
    let mut log_p = vec![0.0f64; rows.n * classes];
    for i in 0..rows.n {
        let row = &mut log_p[i * classes..(i + 1) * classes];
        for (j, v) in row.iter_mut().enumerate() {
            *v = rows.get(i, j);
        }
        if logits {
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            row.iter_mut().for_each(|v| *v -= lse);
        } else {
            let sum: f64 = row.iter().sum();
            if let Some(j) = row.iter().position(|&p| p < 0.0) {
                return Err(Error::metrics(
                    what,
                    format!(
                        "sample {i} has probability {} for class {j}; pass logits instead",
                        row[j]
                    ),
                ));
            }
            if (sum - 1.0).abs() > 1e-3 {
                return Err(Error::metrics(
                    what,
                    format!(
                        "the probabilities of sample {i} sum to {sum}, not 1; pass Predictions::Logits if \
                         these are logits"
                    ),
                ));
            }
            row.iter_mut().for_each(|p| *p = (*p / sum).ln());
        }
    }
    let scores: Vec<f64> = (0..splits)
        .map(|k| {
            let (lo, hi) = (k * rows.n / splits, (k + 1) * rows.n / splits);
            let part = &log_p[lo * classes..hi * classes];
            let count = (hi - lo) as f64;
            let mut p_y = vec![0.0f64; classes];
            for row in part.chunks(classes) {
                p_y.iter_mut().zip(row).for_each(|(s, l)| *s += l.exp());
            }
            let log_p_y: Vec<f64> = p_y.iter().map(|s| (s / count).ln()).collect();
            let kl: f64 = part
                .chunks(classes)
                .map(|row| {
                    // Terms with p = 0 (including underflowed ones) are 0 by 0 log 0 = 0.
                    row.iter()
                        .zip(&log_p_y)
                        .map(|(l, q)| (l.exp(), l - q))
                        .filter(|(p, _)| *p > 0.0)
                        .map(|(p, log_ratio)| p * log_ratio)
                        .sum::<f64>()
                })
                .sum();
            (kl / count).exp()
        })
        .collect();
    let mean = scores.iter().sum::<f64>() / splits as f64;
    let var = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / splits as f64;
    Ok((mean, var.sqrt()))
}
