//! Sample-quality metrics on CPU features, all in f64: Fréchet distance (FID), kernel inception
//! distance (KID) and Inception Score; pure Rust (nalgebra), so they build for wasm32 as well.
//!
//! Features are row-major `n x dim` slices of `f32` or `f64` (one row per sample), as a feature
//! network's output reads back. Every function checks shapes and finiteness first and names the
//! input, the problem and the fix in an [`Error::Metrics`](crate::Error::Metrics).

mod frechet;
mod inception;
mod kid;
mod stats;

pub use frechet::{frechet_distance, trace_sqrt_product};
pub use inception::{inception_score, Predictions, IS_SPLITS};
pub use kid::{kid, mmd2_unbiased, KID_SUBSETS, KID_SUBSET_SIZE};
pub use stats::FeatureStats;

use crate::{Error, Result};

/// A checked row-major feature matrix: `n` rows of `dim` finite values.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a, T> {
    data: &'a [T],
    n: usize,
    dim: usize,
}

impl<T: Copy + Into<f64>> Rows<'_, T> {
    /// Feature `j` of sample `i` in f64.
    #[inline]
    fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.dim + j].into()
    }
}

/// Checks that `data` is `n x dim` with `n >= min_rows` and only finite values; `what` names the
/// input and `purpose` what the rows are needed for, in the error messages.
pub(crate) fn check_rows<'a, T: Copy + Into<f64>>(
    what: &str,
    data: &'a [T],
    dim: usize,
    min_rows: usize,
    purpose: &str,
) -> Result<Rows<'a, T>> {
    if dim == 0 {
        return Err(Error::metrics(
            what,
            "the feature dimension is 0; pass the number of features per sample",
        ));
    }
    if data.len() % dim != 0 {
        return Err(Error::metrics(
            what,
            format!(
                "{} values do not split into rows of {dim} features ({} left over); pass a row-major \
                 n x {dim} matrix or the right dimension",
                data.len(),
                data.len() % dim
            ),
        ));
    }
    let n = data.len() / dim;
    if n < min_rows {
        return Err(Error::metrics(
            what,
            format!("{n} samples, but {purpose} needs at least {min_rows}; pass more samples"),
        ));
    }
    let mut bad = data.iter().enumerate().filter(|(_, v)| !(**v).into().is_finite());
    if let Some((first, v)) = bad.next() {
        let count = 1 + bad.count();
        return Err(Error::metrics(
            what,
            format!(
                "{count} of {} values are not finite (the first, {}, is sample {} feature {}); the \
                 network that made them produced NaN/inf — check its inputs and weights",
                data.len(),
                (*v).into(),
                first / dim,
                first % dim
            ),
        ));
    }
    Ok(Rows { data, n, dim })
}
