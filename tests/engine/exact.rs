//! Exact 2-D Gaussian mixtures as denoisers (the true score of every noised marginal, computed
//! in f64 on the CPU) and the statistical check of a sampler's output moments against them.

use crate::common::gpu;
use wgdiff::diffusion::{Denoiser, Marginals, Output, Process};
use wgdiff::{Result, Tensor};

/// A weighted mixture of 2-D Gaussians (one component = a Gaussian).
#[derive(Clone)]
pub struct Mixture {
    pub components: Vec<(f64, [f64; 2], [[f64; 2]; 2])>,
}

/// N((1, -0.5), [[1, 0.6], [0.6, 0.8]]): eigenvalues 0.29 and 1.51.
pub fn gaussian() -> Mixture {
    Mixture {
        components: vec![(1.0, [1.0, -0.5], [[1.0, 0.6], [0.6, 0.8]])],
    }
}

/// Two well-separated modes with weights 0.4 / 0.6 and different covariances.
pub fn two_modes() -> Mixture {
    Mixture {
        components: vec![
            (0.4, [-1.2, 0.8], [[0.3, 0.1], [0.1, 0.2]]),
            (0.6, [1.3, -0.4], [[0.25, -0.08], [-0.08, 0.35]]),
        ],
    }
}

impl Mixture {
    /// Mean and covariance of the whole mixture.
    pub fn moments(&self) -> ([f64; 2], [[f64; 2]; 2]) {
        let mut mean = [0.0; 2];
        for (w, m, _) in &self.components {
            (0..2).for_each(|i| mean[i] += w * m[i]);
        }
        let mut cov = [[0.0; 2]; 2];
        for (w, m, c) in &self.components {
            for i in 0..2 {
                for j in 0..2 {
                    cov[i][j] += w * (c[i][j] + (m[i] - mean[i]) * (m[j] - mean[j]));
                }
            }
        }
        (mean, cov)
    }

    /// Responsibilities of each component for x under the marginal alpha x0 + std z, and
    /// each component's score there.
    fn posterior(&self, x: [f64; 2], alpha: f64, std: f64) -> Vec<(f64, [f64; 2])> {
        let parts: Vec<(f64, [f64; 2])> = self
            .components
            .iter()
            .map(|(w, m, c)| {
                let s2 = std * std;
                let a2 = alpha * alpha;
                let (p, q, r) = (a2 * c[0][0] + s2, a2 * c[0][1], a2 * c[1][1] + s2);
                let det = p * r - q * q;
                let d = [x[0] - alpha * m[0], x[1] - alpha * m[1]];
                // precision times d
                let pd = [(r * d[0] - q * d[1]) / det, (p * d[1] - q * d[0]) / det];
                let log = w.ln() - 0.5 * det.ln() - 0.5 * (d[0] * pd[0] + d[1] * pd[1]);
                (log, [-pd[0], -pd[1]])
            })
            .collect();
        let top = parts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = parts.iter().map(|p| (p.0 - top).exp()).sum();
        parts
            .into_iter()
            .map(|(l, s)| ((l - top).exp() / total, s))
            .collect()
    }

    /// The score of the marginal at x.
    pub fn score(&self, x: [f64; 2], alpha: f64, std: f64) -> [f64; 2] {
        self.posterior(x, alpha, std)
            .into_iter()
            .fold([0.0; 2], |acc, (r, s)| [acc[0] + r * s[0], acc[1] + r * s[1]])
    }

    /// Index of the component a clean sample most likely came from.
    pub fn mode_of(&self, x: [f64; 2]) -> usize {
        let post = self.posterior(x, 1.0, 1e-3);
        (0..post.len())
            .max_by(|&a, &b| post[a].0.total_cmp(&post[b].0))
            .unwrap_or(0)
    }
}

/// The exact network of a process for a mixture: its raw output (eps, x0, v or score) from
/// the true score, optionally scaled (to check that the tests can fail).
pub struct Exact {
    pub data: Mixture,
    pub marginals: Marginals,
    pub score_scale: f64,
}

impl Exact {
    pub fn new(process: &Process, data: Mixture) -> Exact {
        Exact {
            data,
            marginals: process.marginals().unwrap(),
            score_scale: 1.0,
        }
    }
}

impl Denoiser for Exact {
    fn predict(&self, x: &Tensor, t: f32, _skip: usize) -> Result<Tensor> {
        let level = self.marginals.level(t);
        let (a, s) = (level.alpha, level.std);
        let values = x.to_vec()?;
        let out: Vec<f32> = values
            .chunks(2)
            .flat_map(|p| {
                let xp = [p[0] as f64, p[1] as f64];
                let score = self.data.score(xp, a, s).map(|v| v * self.score_scale);
                let eps = score.map(|v| -s * v);
                let x0 = [0, 1].map(|i| (xp[i] + s * s * score[i]) / a);
                let raw = match self.marginals.output() {
                    Output::Score => score,
                    Output::Eps => eps,
                    Output::X0 => x0,
                    Output::V => [0, 1].map(|i| a * eps[i] - s * x0[i]),
                };
                raw.map(|v| v as f32)
            })
            .collect();
        Tensor::from_f32(gpu(), x.shape(), &out)
    }
}

/// How far a sampler's own discretisation may move the moments (from a moment recursion of
/// the sampler on each eigen-direction of the Gaussian with its exact score, see the tests).
#[derive(Clone, Copy)]
pub struct Allowance {
    /// Absolute, on each mean coordinate.
    pub mean: f64,
    /// Relative, on each covariance entry (times sqrt(C_ii C_jj)).
    pub cov: f64,
}

/// Asserts the samples' mean, covariance (and, for mixtures, mode weights) match `want`
/// within 4 standard errors (estimated from the samples) plus the sampler's allowance.
pub fn check_moments(what: &str, samples: &Tensor, want: &Mixture, allowance: Allowance) {
    let v: Vec<f64> = samples.to_vec().unwrap().into_iter().map(f64::from).collect();
    let points: Vec<[f64; 2]> = v.chunks(2).map(|p| [p[0], p[1]]).collect();
    let n = points.len() as f64;
    assert!(
        points.iter().all(|p| p[0].is_finite() && p[1].is_finite()),
        "{what}: non-finite samples"
    );
    let mean = [0, 1].map(|i| points.iter().map(|p| p[i]).sum::<f64>() / n);
    let (want_mean, want_cov) = want.moments();
    for i in 0..2 {
        let var = points.iter().map(|p| (p[i] - mean[i]).powi(2)).sum::<f64>() / n;
        let tol = 4.0 * (var / n).sqrt() + allowance.mean;
        assert!(
            (mean[i] - want_mean[i]).abs() <= tol,
            "{what}: mean[{i}] = {:.4}, want {:.4} (tolerance {tol:.4})",
            mean[i],
            want_mean[i]
        );
    }
    for (i, j) in [(0, 0), (0, 1), (1, 1)] {
        let y: Vec<f64> = points
            .iter()
            .map(|p| (p[i] - mean[i]) * (p[j] - mean[j]))
            .collect();
        let c = y.iter().sum::<f64>() / n;
        let se = (y.iter().map(|v| (v - c).powi(2)).sum::<f64>() / n / n).sqrt();
        let tol = 4.0 * se + allowance.cov * (want_cov[i][i] * want_cov[j][j]).sqrt();
        assert!(
            (c - want_cov[i][j]).abs() <= tol,
            "{what}: cov[{i}][{j}] = {c:.4}, want {:.4} (tolerance {tol:.4})",
            want_cov[i][j]
        );
    }
    if want.components.len() > 1 {
        let w = want.components[0].0;
        let share = points.iter().filter(|&&p| want.mode_of(p) == 0).count() as f64 / n;
        let tol = 4.0 * (w * (1.0 - w) / n).sqrt() + allowance.cov;
        assert!(
            (share - w).abs() <= tol,
            "{what}: mode 0 holds {share:.3} of the samples, want {w:.3} (tolerance {tol:.3})"
        );
    }
}
