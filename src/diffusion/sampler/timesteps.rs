//! Time grids the samplers walk: VP timesteps spaced uniformly, quadratically (DDIM paper),
//! uniformly in log-SNR (DPM-Solver), trailing (diffusers) or given one by one (a searched
//! schedule), rounded to distinct integers; log-SNR both ways; linspaces.

use crate::diffusion::schedule::AlphaBars;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// How a VP sampler spaces its timesteps between T-1 and 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spacing {
    /// Evenly in the timestep index.
    Uniform,
    /// Index ∝ i² (dense near the data, as the DDIM paper's CIFAR-10 runs).
    Quadratic,
    /// Evenly in log-SNR, lambda = log(alpha / std) (DPM-Solver's default).
    LogSnr,
    /// Every (T/steps)-th timestep counted down from the first, the last at T/steps - 1, then
    /// the data (diffusers' `trailing` spacing; its DDIM scheduler steps by exactly T/steps).
    Trailing,
}

impl std::str::FromStr for Spacing {
    type Err = Error;

    /// `uniform`, `quadratic` or `log-snr`.
    fn from_str(name: &str) -> Result<Spacing> {
        match name {
            "uniform" => Ok(Spacing::Uniform),
            "quadratic" => Ok(Spacing::Quadratic),
            "log-snr" => Ok(Spacing::LogSnr),
            "trailing" => Ok(Spacing::Trailing),
            _ => Err(Error::Diffusion(format!(
                "unknown timestep spacing `{name}`; choose uniform, quadratic, log-snr or trailing"
            ))),
        }
    }
}

/// The log-SNR lambda = log(alpha / std) = (log ab - log(1 - ab)) / 2 at VP timestep `tau`.
pub fn log_snr(alpha_bars: &AlphaBars, tau: f64) -> f64 {
    let log_ab = alpha_bars.log_alpha_bar(tau);
    0.5 * (log_ab - (-log_ab.exp()).ln_1p())
}

/// The VP timestep whose log-SNR is `lambda` (the inverse of [`log_snr`]).
pub fn timestep_of_log_snr(alpha_bars: &AlphaBars, lambda: f64) -> f64 {
    // alpha-bar = sigmoid(2 lambda)  =>  log alpha-bar = -softplus(-2 lambda)
    alpha_bars.timestep_of_log_alpha_bar(-softplus(-2.0 * lambda))
}

/// `points` fractional timesteps from `from` (T-1 for a run from noise) down to 0.
pub fn vp_times(alpha_bars: &AlphaBars, spacing: Spacing, points: usize, from: f64) -> Vec<f64> {
    let last = from;
    let lambda = |tau: f64| log_snr(alpha_bars, tau);
    let (lambda_start, lambda_end) = (lambda(last), lambda(0.0));
    let stride = (last + 1.0) / points as f64;
    linspace(1.0, 0.0, points)
        .into_iter()
        .enumerate()
        .map(|(i, u)| match spacing {
            Spacing::Uniform => u * last,
            Spacing::Quadratic => u * u * last,
            Spacing::LogSnr => timestep_of_log_snr(alpha_bars, lambda_end + u * (lambda_start - lambda_end)),
            // (diffusers: round(arange(T, 0, -T/n)) - 1)
            Spacing::Trailing => (last + 1.0 - i as f64 * stride).round() - 1.0,
        })
        .collect()
}

/// Errors unless `timesteps` can be a sampler's grid of `steps` network calls: as many,
/// finite, strictly decreasing, within [0, `last`] (T-1) and, for DPM-Solver++, which steps on
/// to 0 after its last call, above 0.
pub fn check_timesteps(timesteps: &[f64], steps: usize, last: f64, sampler: &str) -> Result<()> {
    let bad = |why: String| Err(Error::Diffusion(format!("{sampler}: the given timesteps {why}")));
    if timesteps.len() != steps {
        return bad(format!(
            "are {}, for {steps} steps (give one per step)",
            timesteps.len()
        ));
    }
    if let Some(t) = timesteps.iter().find(|t| !(0.0..=last).contains(*t)) {
        let range = match last.is_finite() {
            true => format!("0..={last}"),
            false => "0..=T-1".into(),
        };
        return bad(format!("hold {t}, outside {range} (the process's timesteps)"));
    }
    if let Some(w) = timesteps.windows(2).find(|w| w[1] >= w[0]) {
        return bad(format!(
            "must decrease from noise to data, but {} follows {}",
            w[1], w[0]
        ));
    }
    if sampler.starts_with("dpm-solver++") && timesteps.last() == Some(&0.0) {
        return bad(format!(
            "end at 0; {sampler} steps on to 0 after its last network call, so its last timestep lies above 0"
        ));
    }
    Ok(())
}

/// `times` (decreasing, in [0, T-1]) rounded to distinct integers, still decreasing and
/// still spanning their first .. 0 where they did; needs at most `steps` (first + 1) of them.
pub(super) fn distinct_integers(times: &[f64], steps: usize, sampler: &str) -> Result<Vec<f64>> {
    let n = times.len();
    if n > steps {
        return Err(Error::Diffusion(format!(
            "{sampler}: {n} steps but only {steps} timesteps lie between {} and 0",
            steps.saturating_sub(1)
        )));
    }
    // increasing order: push up past duplicates, then pull down below T-1
    let mut up: Vec<usize> = times.iter().rev().map(|t| t.round() as usize).collect();
    for i in 1..n {
        up[i] = up[i].max(up[i - 1] + 1);
    }
    for i in (0..n).rev() {
        up[i] = up[i].min(steps - n + i);
    }
    Ok(up.into_iter().rev().map(|t| t as f64).collect())
}

/// `points` values from `start` to `end`, both included.
pub(super) fn linspace(start: f64, end: f64, points: usize) -> Vec<f64> {
    if points == 1 {
        return vec![start];
    }
    (0..points)
        .map(|i| start + (end - start) * i as f64 / (points - 1) as f64)
        .collect()
}

fn softplus(x: f64) -> f64 {
    if x > 30.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}
