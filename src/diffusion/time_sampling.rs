//! How training draws its network times: uniformly over the process, or logit-normal over
//! normalised time, which spends the steps on the middle noise levels.

use super::Process;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The distribution of a training batch's network times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeSampling {
    /// Every time of the process alike (Ho et al.'s training).
    #[default]
    Uniform,
    /// Normalised time u = sigmoid(mean + std n), n ~ N(0, 1), then the process's time at u
    /// (VP: step floor(u T)). *Scaling Rectified Flow Transformers for High-Resolution Image
    /// Synthesis* (Patrick Esser, Sumith Kulal, Andreas Blattmann et al.) found (0, 1) best
    /// among their time distributions; on the main job's MLP it took MNIST-FID from 17.1 to
    /// 11.7 at 1,000 samples (docs/training.md, "Time sampling").
    LogitNormal { mean: f32, std: f32 },
}

impl TimeSampling {
    /// Logit-normal (0, 1), the MLP's default.
    pub const LOGIT_NORMAL: TimeSampling = TimeSampling::LogitNormal { mean: 0.0, std: 1.0 };

    /// Parses `uniform`, `logit-normal` (mean 0, std 1) or `logit-normal:MEAN,STD`.
    pub fn parse(text: &str) -> Result<TimeSampling> {
        let bad = || {
            Error::Config(format!(
                "time sampling \"{text}\": expected `uniform`, `logit-normal` or `logit-normal:MEAN,STD` \
                 (std > 0), e.g. logit-normal:0,1"
            ))
        };
        let sampling = match text.split_once(':') {
            None if text == "uniform" => TimeSampling::Uniform,
            None if text == "logit-normal" => TimeSampling::LOGIT_NORMAL,
            Some(("logit-normal", pair)) => {
                let (mean, std) = pair.split_once(',').ok_or_else(bad)?;
                TimeSampling::LogitNormal {
                    mean: mean.trim().parse().map_err(|_| bad())?,
                    std: std.trim().parse().map_err(|_| bad())?,
                }
            }
            _ => return Err(bad()),
        };
        sampling.check().map_err(|_| bad())?;
        Ok(sampling)
    }

    /// An error unless the parameters are finite and the std positive.
    pub fn check(&self) -> Result<()> {
        match *self {
            TimeSampling::LogitNormal { mean, std } if !(mean.is_finite() && std.is_finite() && std > 0.0) => {
                Err(Error::Config(format!(
                    "logit-normal time sampling needs a finite mean and a finite std > 0, got mean {mean}, std {std}"
                )))
            }
            _ => Ok(()),
        }
    }

    /// An error naming the process unless this sampling applies to it (logit-normal: VP
    /// processes, whose discrete steps it draws).
    pub fn check_process(&self, process: &Process) -> Result<()> {
        match (self, process) {
            (TimeSampling::LogitNormal { .. }, Process::Ve { .. } | Process::Ncsn { .. }) => {
                Err(Error::Config(format!(
                    "{self} time sampling applies to VP processes, not {}: leave time_sampling out (uniform)",
                    process.name()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Network time inputs for `batch` examples of `process`, drawn on the CPU from `rng` (so
    /// training is reproducible). Uniform draws as [`Process::sample_times`] over the whole
    /// process; logit-normal needs a VP process (its discrete steps).
    pub fn draw(&self, process: &Process, rng: &mut impl rand::Rng, batch: usize) -> Result<Vec<f32>> {
        let TimeSampling::LogitNormal { mean, std } = *self else {
            return process.sample_times(rng, batch, 0.0..1.0);
        };
        self.check()?;
        self.check_process(process)?;
        // check_process admits VP processes only, whose step count the variant holds
        let &Process::Vp { steps, .. } = process else {
            unreachable!("check_process admitted {}", process.name())
        };
        let (mean, std) = (mean as f64, std as f64);
        Ok((0..batch)
            .map(|_| {
                // Box-Muller: a standard normal from two uniforms
                let (u1, u2): (f64, f64) = (rng.random_range(f64::MIN_POSITIVE..1.0), rng.random());
                let n = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let u = 1.0 / (1.0 + (-(mean + std * n)).exp());
                ((u * steps as f64).floor() as usize).min(steps.saturating_sub(1)) as f32
            })
            .collect())
    }
}

impl std::fmt::Display for TimeSampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeSampling::Uniform => write!(f, "uniform"),
            TimeSampling::LogitNormal { mean, std } => write!(f, "logit-normal:{mean},{std}"),
        }
    }
}
