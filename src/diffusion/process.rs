//! The forward noising processes (DDPM's VP, the VE SDE, NCSN's sigma levels) as a serde config,
//! and `Marginals`: x_t = alpha(t) x0 + std(t) z at each network time input, plus output conversions.

use super::schedule::{AlphaBars, BetaSchedule};
use crate::{Error, Result, Tensor};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// What a VP network predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// The noise eps (Ho et al.).
    Eps,
    /// The clean data x0.
    X0,
    /// The velocity v = alpha eps - std x0 (Salimans & Ho).
    V,
}

impl std::str::FromStr for Objective {
    type Err = Error;

    /// `eps`, `x0` or `v`.
    fn from_str(name: &str) -> Result<Objective> {
        match name {
            "eps" => Ok(Objective::Eps),
            "x0" => Ok(Objective::X0),
            "v" => Ok(Objective::V),
            _ => Err(Error::Config(format!(
                "unknown objective `{name}`; choose eps, x0 or v"
            ))),
        }
    }
}

/// The most timesteps (VP) or noise levels (NCSN) a process may have: DDPM uses 1000, and the
/// precomputed tables stay small.
pub const MAX_DISCRETE_TIMES: usize = 100_000;

/// A forward noising process; it goes into checkpoint configs.
///
/// Network time inputs (what `DiffusionNet::forward` receives as `t`):
/// - `Vp`: the timestep index as f32, 0..T-1 (fractional between integers for the continuous
///   samplers);
/// - `Ve`: continuous t in [eps, 1];
/// - `Ncsn`: the level index as f32, 0 = `sigma_max` .. levels-1 = `sigma_min`.
///
/// Normalised time (1 = pure noise; the skip schedule reads it): `Vp` index/(T-1), `Ve` t,
/// `Ncsn` 1 - index/(levels-1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Process {
    /// Discrete DDPM: x_i = sqrt(alpha-bar_i) x0 + sqrt(1 - alpha-bar_i) z, i = 0..steps-1.
    Vp {
        schedule: BetaSchedule,
        steps: usize,
        objective: Objective,
    },
    /// The VE SDE of the score-SDE tutorial: std(t) = sqrt((sigma^(2t) - 1) / (2 ln sigma)),
    /// g(t) = sigma^t, t in [eps, 1]; the network outputs the score.
    Ve { sigma: f32, eps: f32 },
    /// NCSN v1: `levels` geometric sigmas from `sigma_max` down to `sigma_min`; the network
    /// outputs the score.
    Ncsn {
        sigma_max: f32,
        sigma_min: f32,
        levels: usize,
    },
}

impl Process {
    /// DDPM: linear betas 1e-4..0.02, T = 1000, eps prediction.
    pub fn ddpm() -> Process {
        Process::Vp {
            schedule: BetaSchedule::LINEAR,
            steps: 1000,
            objective: Objective::Eps,
        }
    }

    /// The tutorial's VE SDE: sigma = 25, eps = 1e-5.
    pub fn ve() -> Process {
        Process::Ve {
            sigma: 25.0,
            eps: 1e-5,
        }
    }

    /// NCSN v1 as for MNIST: sigmas 1 .. 0.01 over 10 levels.
    pub fn ncsn() -> Process {
        Process::Ncsn {
            sigma_max: 1.0,
            sigma_min: 0.01,
            levels: 10,
        }
    }

    /// The VP process with the cosine schedule (T = 1000) predicting v: the MLP's default,
    /// chosen by `wgdiff experiment speedrun`.
    pub fn vp_cosine_v() -> Process {
        Process::Vp {
            schedule: BetaSchedule::COSINE,
            steps: 1000,
            objective: Objective::V,
        }
    }

    /// This VP process with its schedule and/or objective replaced; an error for the score
    /// processes (VE, NCSN), which have neither.
    pub fn with_vp(&self, schedule: Option<BetaSchedule>, objective: Option<Objective>) -> Result<Process> {
        match self {
            Process::Vp {
                schedule: s,
                steps,
                objective: o,
            } => Ok(Process::Vp {
                schedule: schedule.unwrap_or(*s),
                steps: *steps,
                objective: objective.unwrap_or(*o),
            }),
            other => Err(Error::Config(format!(
                "a schedule or objective applies to DDPM's VP process; this model trains the {} process \
                 (its network outputs the score)",
                other.name()
            ))),
        }
    }

    /// Short name for messages: `vp`, `ve` or `ncsn`.
    pub fn name(&self) -> &'static str {
        match self {
            Process::Vp { .. } => "vp",
            Process::Ve { .. } => "ve",
            Process::Ncsn { .. } => "ncsn",
        }
    }

    /// Checks the settings and precomputes the marginals.
    pub fn marginals(&self) -> Result<Marginals> {
        if let Process::Vp { steps: n, .. } | Process::Ncsn { levels: n, .. } = *self {
            if n > MAX_DISCRETE_TIMES {
                return Err(Error::Diffusion(format!(
                    "the {} process has {n} timesteps; at most {MAX_DISCRETE_TIMES} are supported (DDPM \
                     uses 1000)",
                    self.name()
                )));
            }
        }
        let kind = match *self {
            Process::Vp {
                schedule,
                steps,
                objective,
            } => MarginalKind::Vp {
                alpha_bars: AlphaBars::new(&schedule, steps)?,
                objective,
            },
            Process::Ve { sigma, eps } => {
                if !(sigma > 1.0 && sigma.is_finite() && eps > 0.0 && eps < 1.0) {
                    return Err(Error::Diffusion(format!(
                        "VE process needs sigma > 1 and 0 < eps < 1, got sigma {sigma}, eps {eps}"
                    )));
                }
                MarginalKind::Ve {
                    sigma: sigma as f64,
                    eps: eps as f64,
                }
            }
            Process::Ncsn {
                sigma_max,
                sigma_min,
                levels,
            } => {
                if !(sigma_min > 0.0 && sigma_max >= sigma_min && sigma_max.is_finite() && levels >= 1) {
                    return Err(Error::Diffusion(format!(
                        "NCSN process needs sigma_max >= sigma_min > 0 and levels >= 1, got {sigma_max}, \
                         {sigma_min}, {levels}"
                    )));
                }
                let ratio = sigma_min as f64 / sigma_max as f64;
                let last = (levels - 1).max(1) as f64;
                let sigmas = (0..levels)
                    .map(|i| sigma_max as f64 * ratio.powf(i as f64 / last))
                    .collect();
                MarginalKind::Ncsn { sigmas }
            }
        };
        Ok(Marginals { kind })
    }

    /// Network time inputs for `batch` examples, drawn uniformly (on the CPU, from `rng`, so
    /// training is reproducible) from the process's times whose normalised time lies in
    /// `range` = [start, end) (t = 1 counts as inside when end >= 1). `0.0..1.0` is every time.
    pub fn sample_times(
        &self,
        rng: &mut impl rand::Rng,
        batch: usize,
        range: Range<f32>,
    ) -> Result<Vec<f32>> {
        let marginals = self.marginals()?;
        let inside = |n: f32| n >= range.start && (n < range.end || (range.end >= 1.0 && n >= 1.0));
        if let MarginalKind::Ve { eps, .. } = marginals.kind {
            let lo = (range.start as f64).max(eps);
            let hi = (range.end as f64).min(1.0);
            if lo >= hi {
                return Err(Error::Diffusion(format!(
                    "no VE times in {range:?} (t runs over [{eps}, 1])"
                )));
            }
            return Ok((0..batch).map(|_| rng.random_range(lo..hi) as f32).collect());
        }
        let candidates: Vec<f32> = (0..marginals.discrete_times())
            .map(|i| i as f32)
            .filter(|&t| inside(marginals.normalized_time(t)))
            .collect();
        if candidates.is_empty() {
            return Err(Error::Diffusion(format!(
                "no {} timesteps have normalised time in {range:?}",
                self.name()
            )));
        }
        Ok((0..batch)
            .map(|_| candidates[rng.random_range(0..candidates.len())])
            .collect())
    }
}

/// x_t = alpha x0 + std z at one time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    pub alpha: f64,
    pub std: f64,
}

/// What the network's raw output is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Eps,
    X0,
    V,
    Score,
}

/// A checked process with its tables: the marginal at every network time input, the
/// continuous-time SDE (VP and VE), and conversions of raw network outputs.
#[derive(Clone, Debug)]
pub struct Marginals {
    kind: MarginalKind,
}

#[derive(Clone, Debug)]
enum MarginalKind {
    Vp {
        alpha_bars: AlphaBars,
        objective: Objective,
    },
    Ve {
        sigma: f64,
        eps: f64,
    },
    Ncsn {
        sigmas: Vec<f64>,
    },
}

impl Marginals {
    /// alpha and std at a network time input.
    pub fn level(&self, t: f32) -> Level {
        match &self.kind {
            MarginalKind::Vp { alpha_bars, .. } => {
                let ab = alpha_bars.alpha_bar(t as f64);
                Level {
                    alpha: ab.sqrt(),
                    std: (1.0 - ab).sqrt(),
                }
            }
            MarginalKind::Ve { sigma, .. } => Level {
                alpha: 1.0,
                std: ve_std(*sigma, t as f64),
            },
            MarginalKind::Ncsn { sigmas } => {
                let i = (t.max(0.0).round() as usize).min(sigmas.len() - 1);
                Level {
                    alpha: 1.0,
                    std: sigmas[i],
                }
            }
        }
    }

    /// What the network outputs.
    pub fn output(&self) -> Output {
        match &self.kind {
            MarginalKind::Vp {
                objective: Objective::Eps,
                ..
            } => Output::Eps,
            MarginalKind::Vp {
                objective: Objective::X0,
                ..
            } => Output::X0,
            MarginalKind::Vp {
                objective: Objective::V,
                ..
            } => Output::V,
            MarginalKind::Ve { .. } | MarginalKind::Ncsn { .. } => Output::Score,
        }
    }

    /// Normalised time in [0, 1] (1 = pure noise) of a network time input.
    pub fn normalized_time(&self, t: f32) -> f32 {
        match &self.kind {
            MarginalKind::Vp { alpha_bars, .. } => t / alpha_bars.last() as f32,
            MarginalKind::Ve { .. } => t,
            MarginalKind::Ncsn { sigmas } => 1.0 - t / (sigmas.len() - 1).max(1) as f32,
        }
    }

    /// The network time input of pure noise (VP: T-1, VE: 1, NCSN: the largest sigma's 0).
    pub fn noisiest_time(&self) -> f32 {
        match &self.kind {
            MarginalKind::Vp { alpha_bars, .. } => alpha_bars.last() as f32,
            MarginalKind::Ve { .. } => 1.0,
            MarginalKind::Ncsn { .. } => 0.0,
        }
    }

    /// Number of discrete times (VP timesteps, NCSN levels); 0 for the continuous VE.
    pub fn discrete_times(&self) -> usize {
        match &self.kind {
            MarginalKind::Vp { alpha_bars, .. } => alpha_bars.steps(),
            MarginalKind::Ve { .. } => 0,
            MarginalKind::Ncsn { sigmas } => sigmas.len(),
        }
    }

    /// The alpha-bar table of a VP process.
    pub fn alpha_bars(&self) -> Option<&AlphaBars> {
        match &self.kind {
            MarginalKind::Vp { alpha_bars, .. } => Some(alpha_bars),
            _ => None,
        }
    }

    /// The VE network time whose marginal std is `std` (the inverse of std(t)); `None` for
    /// other processes.
    pub fn ve_time_of_std(&self, std: f64) -> Option<f64> {
        match self.kind {
            MarginalKind::Ve { sigma, .. } => {
                let two_log = 2.0 * sigma.ln();
                Some((two_log * std * std).ln_1p() / two_log)
            }
            _ => None,
        }
    }

    /// NCSN's sigma levels, largest first.
    pub fn sigmas(&self) -> Option<&[f64]> {
        match &self.kind {
            MarginalKind::Ncsn { sigmas } => Some(sigmas),
            _ => None,
        }
    }

    /// The SDE dx = f(t) x dt + g(t) dW in network time, for VP (per unit timestep:
    /// f = -beta/2, g² = beta) and VE (f = 0, g² = sigma^(2t)); `None` for NCSN.
    pub fn sde(&self) -> Option<Sde<'_>> {
        match &self.kind {
            MarginalKind::Vp { alpha_bars, .. } => Some(Sde {
                kind: SdeKind::Vp(alpha_bars),
                start: alpha_bars.last(),
                end: 0.0,
            }),
            MarginalKind::Ve { sigma, eps } => Some(Sde {
                kind: SdeKind::Ve { sigma: *sigma },
                start: 1.0,
                end: *eps,
            }),
            MarginalKind::Ncsn { .. } => None,
        }
    }

    /// Converts a raw network output at `level` into the noise eps.
    pub fn eps(&self, raw: &Tensor, x: &Tensor, level: Level) -> Result<Tensor> {
        let Level { alpha: a, std: s } = level;
        match self.output() {
            Output::Eps => Ok(raw.clone()),
            Output::X0 => combine(x, 1.0 / s, raw, -a / s),
            Output::V => combine(x, s, raw, a),
            Output::Score => raw.mul_scalar(-s as f32),
        }
    }

    /// Converts a raw network output at `level` into the predicted clean data x0.
    pub fn x0(&self, raw: &Tensor, x: &Tensor, level: Level) -> Result<Tensor> {
        let Level { alpha: a, std: s } = level;
        match self.output() {
            Output::Eps => combine(x, 1.0 / a, raw, -s / a),
            Output::X0 => Ok(raw.clone()),
            Output::V => combine(x, a, raw, -s),
            Output::Score => combine(x, 1.0 / a, raw, s * s / a),
        }
    }

    /// Converts a raw network output at `level` into the score of x_t's marginal.
    pub fn score(&self, raw: &Tensor, x: &Tensor, level: Level) -> Result<Tensor> {
        match self.output() {
            Output::Score => Ok(raw.clone()),
            _ => self.eps(raw, x, level)?.mul_scalar((-1.0 / level.std) as f32),
        }
    }
}

/// p x + q y.
pub(crate) fn combine(x: &Tensor, p: f64, y: &Tensor, q: f64) -> Result<Tensor> {
    x.mul_scalar(p as f32)?.add(&y.mul_scalar(q as f32)?)
}

/// The VE marginal std: sqrt((sigma^(2t) - 1) / (2 ln sigma)).
fn ve_std(sigma: f64, t: f64) -> f64 {
    let two_log = 2.0 * sigma.ln();
    ((two_log * t).exp_m1() / two_log).sqrt()
}

/// The continuous-time SDE of a VP or VE process, run backwards from `start` to `end`.
#[derive(Clone, Copy, Debug)]
pub struct Sde<'a> {
    kind: SdeKind<'a>,
    /// Network time of pure noise (VP: T-1, VE: 1).
    pub start: f64,
    /// Network time where sampling stops (VP: 0, VE: eps).
    pub end: f64,
}

#[derive(Clone, Copy, Debug)]
enum SdeKind<'a> {
    Vp(&'a AlphaBars),
    Ve { sigma: f64 },
}

impl Sde<'_> {
    /// (f, g²) at network time t: drift f x, diffusion g dW.
    pub fn coefficients(&self, t: f64) -> (f64, f64) {
        match self.kind {
            SdeKind::Vp(alpha_bars) => {
                let beta = alpha_bars.beta(t);
                (-0.5 * beta, beta)
            }
            SdeKind::Ve { sigma } => (0.0, sigma.powf(2.0 * t)),
        }
    }

    /// The std of the prior N(0, std² I) that sampling starts from.
    pub fn prior_std(&self) -> f64 {
        match self.kind {
            SdeKind::Vp(_) => 1.0,
            SdeKind::Ve { sigma } => ve_std(sigma, self.start),
        }
    }
}
