//! Kernel inception distance: the unbiased MMD^2 with the cubic polynomial kernel
//! `k(x, y) = (x.y / d + 1)^3`, averaged over random equal-size subsets (Binkowski et al. 2018).

use super::{check_rows, Rows};
use crate::{Error, Result};
use nalgebra::DMatrix;
use rand::{rngs::StdRng, SeedableRng};

/// Number of subsets torch-fidelity (and the KID paper's code) averages over.
pub const KID_SUBSETS: usize = 100;
/// Subset size torch-fidelity uses (capped at the smaller set's size by [`kid`]).
pub const KID_SUBSET_SIZE: usize = 1000;

/// KID between two row-major `n x dim` feature sets: the unbiased MMD^2 of `subsets` pairs of
/// random subsets (each set sampled without replacement, `subset_size` rows from each; `None`
/// = min([`KID_SUBSET_SIZE`], n_a, n_b)), returning the mean and the population standard
/// deviation over subsets, like torch-fidelity. The same `seed` draws the same subsets.
///
/// The estimator is unbiased: its expectation over samples from the two distributions is the
/// true MMD^2, so it is 0 on average (and can be negative) when they are equal.
pub fn kid<T: Copy + Into<f64>>(
    features_a: &[T],
    features_b: &[T],
    dim: usize,
    subsets: usize,
    subset_size: Option<usize>,
    seed: u64,
) -> Result<(f64, f64)> {
    let a = check_rows("KID features a", features_a, dim, 2, "KID")?;
    let b = check_rows("KID features b", features_b, dim, 2, "KID")?;
    if subsets == 0 {
        return Err(Error::metrics(
            "KID",
            "0 subsets; pass at least 1 (the usual is 100)",
        ));
    }
    let max = a.n.min(b.n);
    let m = subset_size.unwrap_or(KID_SUBSET_SIZE.min(max));
    if m < 2 || m > max {
        return Err(Error::metrics(
            "KID",
            format!(
                "subset size {m} does not fit sets of {} and {} samples; it must be between 2 and {max}",
                a.n, b.n
            ),
        ));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let values: Vec<f64> = (0..subsets)
        .map(|_| {
            let ia = rand::seq::index::sample(&mut rng, a.n, m).into_vec();
            let ib = rand::seq::index::sample(&mut rng, b.n, m).into_vec();
            mmd2(&gather(&a, &ia), &gather(&b, &ib))
        })
        .collect();
    let mean = values.iter().sum::<f64>() / subsets as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / subsets as f64;
    Ok((mean, var.sqrt()))
}

/// The unbiased MMD^2 between two whole feature sets (sizes may differ), kernel
/// `(x.y / d + 1)^3`: the mean of k over distinct pairs within a, plus the same within b,
/// minus twice the mean of k over all pairs across.
pub fn mmd2_unbiased<T: Copy + Into<f64>>(features_a: &[T], features_b: &[T], dim: usize) -> Result<f64> {
    let a = check_rows("MMD features a", features_a, dim, 2, "an unbiased MMD^2")?;
    let b = check_rows("MMD features b", features_b, dim, 2, "an unbiased MMD^2")?;
    let all = |r: &Rows<T>| (0..r.n).collect::<Vec<_>>();
    Ok(mmd2(&gather(&a, &all(&a)), &gather(&b, &all(&b))))
}

/// The chosen rows as a column-major `dim x rows.len()` f64 matrix (one sample per column).
fn gather<T: Copy + Into<f64>>(r: &Rows<T>, rows: &[usize]) -> DMatrix<f64> {
    DMatrix::from_fn(r.dim, rows.len(), |j, i| r.get(rows[i], j))
}

/// Unbiased MMD^2 of samples given as columns of `x` and `y`.
fn mmd2(x: &DMatrix<f64>, y: &DMatrix<f64>) -> f64 {
    let d = x.nrows() as f64;
    let (m, n) = (x.ncols() as f64, y.ncols() as f64);
    // Sum of k over the Gram matrix x^T y, without its diagonal if `skip_diagonal`.
    let kernel_sum = |x: &DMatrix<f64>, y: &DMatrix<f64>, skip_diagonal: bool| -> f64 {
        let gram = x.transpose() * y;
        let k = |g: f64| (g / d + 1.0).powi(3);
        let total: f64 = gram.iter().map(|&g| k(g)).sum();
        if skip_diagonal {
            total - gram.diagonal().iter().map(|&g| k(g)).sum::<f64>()
        } else {
            total
        }
    };
    kernel_sum(x, x, true) / (m * (m - 1.0)) + kernel_sum(y, y, true) / (n * (n - 1.0))
        - 2.0 * kernel_sum(x, y, false) / (m * n)
}
