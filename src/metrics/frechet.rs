//! The Fréchet distance between two Gaussians fitted to feature sets (FID on Inception
//! features), in f64 through two symmetric eigendecompositions; exact for rank-deficient covariances.

use super::FeatureStats;
use crate::{Error, Result};
use nalgebra::{DMatrix, SymmetricEigen};

/// The Fréchet (2-Wasserstein) distance between N(mu1, S1) and N(mu2, S2):
/// `|mu1 - mu2|^2 + tr S1 + tr S2 - 2 tr sqrt(S1^1/2 S2 S1^1/2)`.
///
/// pytorch-fid evaluates the last term as `tr sqrtm(S1 S2)`, a square root of a non-symmetric
/// matrix (Schur form) that is inaccurate when the product is singular (fewer samples than
/// features, duplicated or constant features) and falls back to adding `1e-6 I` to both
/// covariances, which changes the answer. Here both square roots are of symmetric PSD matrices
/// (see [`trace_sqrt_product`]): `S1^1/2` from the eigenpairs of `S1`, then
/// `M = S1^1/2 S2 S1^1/2` (symmetrised), whose eigenvalues are those of `S1 S2`, so
/// `tr sqrt(M) = tr sqrt(S1 S2)` exactly, and singular covariances need no offset.
/// The round-off error is ~1e-15 (tr S1 + tr S2), so identical statistics can give a tiny
/// negative number.
pub fn frechet_distance(a: &FeatureStats, b: &FeatureStats) -> Result<f64> {
    a.check("FID statistics a")?;
    b.check("FID statistics b")?;
    if a.dim() != b.dim() {
        return Err(Error::metrics(
            "FID",
            format!(
                "the two statistics have {} and {} features; compute both with the same feature network",
                a.dim(),
                b.dim()
            ),
        ));
    }
    let dmu = (&a.mean - &b.mean).norm_squared();
    Ok(dmu + a.cov.trace() + b.cov.trace() - 2.0 * trace_sqrt_product(&a.cov, &b.cov)?)
}

/// `tr sqrt(S1^1/2 S2 S1^1/2)` (= `tr sqrt(S1 S2)`) for symmetric positive semi-definite `S1`,
/// `S2` of equal size.
///
/// Both square roots take eigenvalues below the eigensolver's noise floor,
/// `d * eps * max |eigenvalue|`, as 0. A backward-stable symmetric eigensolver returns every
/// eigenvalue with an absolute error of about that size, so an exactly zero eigenvalue (a
/// rank-deficient covariance) comes back as +-1e-16 |S|; clamping only the negative ones
/// (the textbook recipe) leaves the positive ones, whose square roots (~1e-8 |S|^1/2 each) make
/// the FID of a rank-deficient set against itself ~-1e-8 tr S instead of ~1e-15 tr S. Eigenvalues
/// that small cannot be told apart from 0 in f64, so zeroing them loses nothing.
pub fn trace_sqrt_product(s1: &DMatrix<f64>, s2: &DMatrix<f64>) -> Result<f64> {
    let root1 = psd_sqrt(s1, "covariance a")?;
    let m = &root1 * s2 * &root1;
    let m = (&m + m.transpose()) * 0.5;
    let eig = eigen(m, "S1^1/2 S2 S1^1/2")?;
    let floor = noise_floor(&eig.eigenvalues);
    Ok(eig
        .eigenvalues
        .iter()
        .filter(|&&l| l > floor)
        .map(|l| l.sqrt())
        .sum())
}

/// The PSD square root `V diag(sqrt(l)) V^T` of a symmetric matrix, eigenvalues at or below
/// the noise floor taken as 0.
fn psd_sqrt(s: &DMatrix<f64>, what: &str) -> Result<DMatrix<f64>> {
    let eig = eigen(s.clone(), what)?;
    let floor = noise_floor(&eig.eigenvalues);
    let mut v = eig.eigenvectors.clone();
    for (j, &l) in eig.eigenvalues.iter().enumerate() {
        let r = if l > floor { l.sqrt() } else { 0.0 };
        v.column_mut(j).scale_mut(r);
    }
    Ok(&v * eig.eigenvectors.transpose())
}

fn noise_floor(eigenvalues: &nalgebra::DVector<f64>) -> f64 {
    let max = eigenvalues.iter().fold(0.0f64, |m, l| m.max(l.abs()));
    eigenvalues.len() as f64 * f64::EPSILON * max
}

fn eigen(m: DMatrix<f64>, what: &str) -> Result<SymmetricEigen<f64, nalgebra::Dyn>> {
    let d = m.nrows();
    SymmetricEigen::try_new(m, f64::EPSILON, 1000 * d.max(1)).ok_or_else(|| {
        Error::metrics(
            "FID",
            format!("the symmetric eigendecomposition of {what} ({d} x {d}) did not converge"),
        )
    })
}
