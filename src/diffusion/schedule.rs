//! Discrete VP noise schedules (linear, cosine, sigmoid betas) and their alpha-bar table, read
//! at fractional timesteps through piecewise-linear log alpha-bar (the continuous-time view).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// How the DDPM betas grow over the T timesteps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BetaSchedule {
    /// Ho et al.: betas evenly spaced from `beta_start` to `beta_end` (1e-4 to 0.02 for T = 1000).
    Linear { beta_start: f32, beta_end: f32 },
    /// Square roots of the betas evenly spaced from sqrt(`beta_start`) to sqrt(`beta_end`)
    /// (diffusers' `scaled_linear`, Latent Diffusion's; 0.00085 to 0.012 for T = 1000).
    ScaledLinear { beta_start: f32, beta_end: f32 },
    /// Nichol & Dhariwal: alpha-bar(t) = cos²((t/T + s)/(1 + s) · π/2), normalised; s = 0.008.
    Cosine { s: f32 },
    /// Chen 2023 / Jabri et al.: alpha-bar(t) ∝ sigmoid(end/tau) - sigmoid((start + t/T (end - start))/tau);
    /// the usual values are start -3, end 3, tau 1.
    Sigmoid { start: f32, end: f32, tau: f32 },
}

impl std::str::FromStr for BetaSchedule {
    type Err = Error;

    /// `linear`, `scaled-linear`, `cosine` or `sigmoid`, with their usual constants.
    fn from_str(name: &str) -> Result<BetaSchedule> {
        BetaSchedule::NAMED
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, schedule)| schedule)
            .ok_or_else(|| {
                let names: Vec<&str> = BetaSchedule::NAMED.iter().map(|(n, _)| *n).collect();
                let (last, rest) = names.split_last().expect("named schedules");
                Error::Config(format!(
                    "unknown noise schedule `{name}`; choose {} or {last}",
                    rest.join(", ")
                ))
            })
    }
}

impl BetaSchedule {
    /// Ho et al.'s linear schedule, 1e-4 to 0.02.
    pub const LINEAR: BetaSchedule = BetaSchedule::Linear {
        beta_start: 1e-4,
        beta_end: 0.02,
    };
    /// Latent Diffusion's scaled linear schedule, sqrt(beta) from sqrt(0.00085) to sqrt(0.012).
    pub const SCALED_LINEAR: BetaSchedule = BetaSchedule::ScaledLinear {
        beta_start: 0.00085,
        beta_end: 0.012,
    };
    /// The improved-DDPM cosine schedule with s = 0.008.
    pub const COSINE: BetaSchedule = BetaSchedule::Cosine { s: 0.008 };
    /// The sigmoid schedule with start -3, end 3, tau 1.
    pub const SIGMOID: BetaSchedule = BetaSchedule::Sigmoid {
        start: -3.0,
        end: 3.0,
        tau: 1.0,
    };

    /// The schedules `--schedule` names, with their names.
    const NAMED: [(&'static str, BetaSchedule); 4] = [
        ("linear", BetaSchedule::LINEAR),
        ("scaled-linear", BetaSchedule::SCALED_LINEAR),
        ("cosine", BetaSchedule::COSINE),
        ("sigmoid", BetaSchedule::SIGMOID),
    ];

    /// The name `--schedule` takes for this schedule, where it is one of the named ones.
    pub fn flag_name(&self) -> Option<&'static str> {
        BetaSchedule::NAMED
            .into_iter()
            .find(|(_, s)| s == self)
            .map(|(name, _)| name)
    }

    /// The `steps` betas (each in (0, 0.999]).
    pub fn betas(&self, steps: usize) -> Result<Vec<f64>> {
        if steps < 2 {
            return Err(Error::Diffusion(format!(
                "a VP process needs at least 2 timesteps, got {steps}"
            )));
        }
        let n = steps as f64;
        let betas: Vec<f64> = match *self {
            BetaSchedule::Linear { beta_start, beta_end }
            | BetaSchedule::ScaledLinear { beta_start, beta_end } => {
                let (a, b) = (beta_start as f64, beta_end as f64);
                if !(a > 0.0 && b >= a && b < 1.0) {
                    return Err(Error::Diffusion(format!(
                        "linear beta schedules need 0 < beta_start <= beta_end < 1, got {a} and {b}"
                    )));
                }
                let evenly = |a: f64, b: f64, i: usize| a + (b - a) * i as f64 / (n - 1.0);
                match self {
                    BetaSchedule::ScaledLinear { .. } => (0..steps)
                        .map(|i| evenly(a.sqrt(), b.sqrt(), i).powi(2))
                        .collect(),
                    _ => (0..steps).map(|i| evenly(a, b, i)).collect(),
                }
            }
            BetaSchedule::Cosine { s } => {
                if !(s >= 0.0 && s.is_finite()) {
                    return Err(Error::Diffusion(format!(
                        "cosine schedule offset s must be >= 0, got {s}"
                    )));
                }
                let s = s as f64;
                betas_from_alpha_bar(steps, |u| {
                    ((u + s) / (1.0 + s) * std::f64::consts::FRAC_PI_2).cos().powi(2)
                })
            }
            BetaSchedule::Sigmoid { start, end, tau } => {
                if !(end > start && tau > 0.0) {
                    return Err(Error::Diffusion(format!(
                        "sigmoid schedule needs end > start and tau > 0, got start {start}, end {end}, tau {tau}"
                    )));
                }
                let (start, end, tau) = (start as f64, end as f64, tau as f64);
                let sigmoid = |z: f64| 1.0 / (1.0 + (-z).exp());
                let v_end = sigmoid(end / tau);
                betas_from_alpha_bar(steps, |u| v_end - sigmoid((start + u * (end - start)) / tau))
            }
        };
        Ok(betas)
    }
}

/// Betas 1 - f((i+1)/T) / f(i/T), clipped to 0.999, for an alpha-bar shape f on [0, 1].
fn betas_from_alpha_bar(steps: usize, f: impl Fn(f64) -> f64) -> Vec<f64> {
    let n = steps as f64;
    (0..steps)
        .map(|i| (1.0 - f((i + 1) as f64 / n) / f(i as f64 / n)).clamp(0.0, 0.999))
        .collect()
}

/// The cumulative products alpha-bar_i = prod_{j <= i} (1 - beta_j) of a schedule, as logs.
#[derive(Clone, Debug)]
pub struct AlphaBars {
    log_alpha_bar: Vec<f64>,
}

impl AlphaBars {
    pub fn new(schedule: &BetaSchedule, steps: usize) -> Result<AlphaBars> {
        let mut acc = 0.0;
        let log_alpha_bar = schedule
            .betas(steps)?
            .into_iter()
            .map(|b| {
                acc += (1.0 - b).ln();
                acc
            })
            .collect();
        Ok(AlphaBars { log_alpha_bar })
    }

    /// T, the number of timesteps.
    pub fn steps(&self) -> usize {
        self.log_alpha_bar.len()
    }

    /// Largest timestep, T - 1.
    pub fn last(&self) -> f64 {
        (self.steps() - 1) as f64
    }

    /// log alpha-bar at a fractional timestep in [0, T-1] (linear between integer timesteps;
    /// clamped outside).
    pub fn log_alpha_bar(&self, tau: f64) -> f64 {
        let tau = tau.clamp(0.0, self.last());
        let i = (tau.floor() as usize).min(self.steps() - 2);
        let frac = tau - i as f64;
        self.log_alpha_bar[i] * (1.0 - frac) + self.log_alpha_bar[i + 1] * frac
    }

    /// alpha-bar at a fractional timestep.
    pub fn alpha_bar(&self, tau: f64) -> f64 {
        self.log_alpha_bar(tau).exp()
    }

    /// beta(tau) = -d log alpha-bar / d tau: the VP SDE's rate per unit timestep.
    pub fn beta(&self, tau: f64) -> f64 {
        let tau = tau.clamp(0.0, self.last());
        let i = (tau.floor() as usize).min(self.steps() - 2);
        self.log_alpha_bar[i] - self.log_alpha_bar[i + 1]
    }

    /// The fractional timestep whose log alpha-bar is `log_ab` (the inverse of
    /// [`AlphaBars::log_alpha_bar`], which decreases strictly), clamped to [0, T-1].
    pub fn timestep_of_log_alpha_bar(&self, log_ab: f64) -> f64 {
        let table = &self.log_alpha_bar;
        if log_ab >= table[0] {
            return 0.0;
        }
        // first index whose value is below log_ab
        let i = table.partition_point(|&v| v >= log_ab);
        if i >= table.len() {
            return self.last();
        }
        let (hi, lo) = (table[i - 1], table[i]);
        (i - 1) as f64 + (hi - log_ab) / (hi - lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_bars_follow_the_papers() {
        let linear = AlphaBars::new(&BetaSchedule::LINEAR, 1000).unwrap();
        assert!((linear.alpha_bar(0.0) - (1.0 - 1e-4)).abs() < 1e-9); // betas are f32 settings
        let want_1: f64 = (1.0 - 1e-4) * (1.0 - (1e-4 + 0.0199 / 999.0));
        assert!((linear.alpha_bar(1.0) - want_1).abs() < 1e-9);
        // sum of the betas ~ 10.05, so alpha-bar_999 ~ exp(-10.07) ~ 4.2e-5
        assert!(
            (linear.alpha_bar(999.0) - 4.04e-5).abs() < 0.3e-5,
            "{}",
            linear.alpha_bar(999.0)
        );
        // cosine: alpha-bar_i = f((i+1)/T) / f(0) while no beta is clipped
        let cosine = AlphaBars::new(&BetaSchedule::COSINE, 1000).unwrap();
        let f = |u: f64| ((u + 0.008) / 1.008 * std::f64::consts::FRAC_PI_2).cos().powi(2);
        for i in [0usize, 10, 500, 900] {
            let want = f((i + 1) as f64 / 1000.0) / f(0.0);
            assert!(
                (cosine.alpha_bar(i as f64) / want - 1.0).abs() < 1e-9,
                "cosine at {i}"
            );
        }
        // sigmoid: f(u) = sigmoid(3) - sigmoid(6u - 3)
        let sigmoid = AlphaBars::new(&BetaSchedule::SIGMOID, 100).unwrap();
        let s = |z: f64| 1.0 / (1.0 + (-z).exp());
        let g = |u: f64| s(3.0) - s(6.0 * u - 3.0);
        assert!((sigmoid.alpha_bar(49.0) / (g(0.5) / g(0.0)) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fractional_timesteps_interpolate_and_invert() {
        let ab = AlphaBars::new(&BetaSchedule::LINEAR, 1000).unwrap();
        let mid = ab.log_alpha_bar(10.5);
        assert!((mid - 0.5 * (ab.log_alpha_bar(10.0) + ab.log_alpha_bar(11.0))).abs() < 1e-15);
        for tau in [0.0, 0.25, 10.5, 500.0, 998.9, 999.0] {
            let back = ab.timestep_of_log_alpha_bar(ab.log_alpha_bar(tau));
            assert!((back - tau).abs() < 1e-6, "{tau} -> {back}");
        }
        assert!((ab.beta(10.5) - (1e-4 + 0.0199 * 11.0 / 999.0)).abs() < 1e-7);
    }

    #[test]
    fn bad_settings_are_errors() {
        assert!(BetaSchedule::LINEAR.betas(1).is_err());
        assert!(BetaSchedule::Linear {
            beta_start: 0.1,
            beta_end: 0.01
        }
        .betas(10)
        .is_err());
        assert!(BetaSchedule::Sigmoid {
            start: 3.0,
            end: -3.0,
            tau: 1.0
        }
        .betas(10)
        .is_err());
    }
}
