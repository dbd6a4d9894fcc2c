//! Progressive distillation (Salimans & Ho, "Progressive Distillation for Fast Sampling of
//! Diffusion Models", 2022): a student learns to take in one deterministic DDIM step what its
//! teacher takes in two, so each round halves the network calls a sample needs. The grids, and
//! the student's loss against the teacher's two steps.

use super::loss::Network;
use super::process::{Marginals, Output};
use super::sampler::{vp_times, Spacing};
use crate::ops::random::Rng;
use crate::{Error, Result, Tensor};

/// The teacher's predictions of the data are clamped to [-DATA_RANGE, DATA_RANGE], as the
/// samplers clamp theirs (`SampleOptions::clip_x0` of a sampling run).
const DATA_RANGE: f32 = 1.0;

/// The timesteps of one distillation round: the student's `steps` DDIM steps on the trailing
/// grid (the one `wgdiff sample --sampler ddim --spacing trailing --steps N` walks), and the
/// teacher's twice as many on its own trailing grid, which holds the student's at every other
/// point (both step by exactly T/steps).
#[derive(Clone, Debug, PartialEq)]
pub struct DistillGrid {
    student: Vec<f64>,
    teacher: Vec<f64>,
}

impl DistillGrid {
    /// The grids of a student taking `steps` steps on the VP process of `marginals`.
    pub fn new(marginals: &Marginals, steps: usize) -> Result<DistillGrid> {
        let alpha_bars = marginals.alpha_bars().ok_or_else(|| {
            Error::Diffusion("distillation walks DDIM's grid: it needs a VP (DDPM-style) process".into())
        })?;
        let last = alpha_bars.last();
        let timesteps = last as usize + 1;
        if steps == 0 || 2 * steps > timesteps {
            return Err(Error::Diffusion(format!(
                "a distilled student takes 1 to {} steps on this process ({timesteps} timesteps; its teacher \
                 takes twice as many), not {steps}",
                timesteps / 2
            )));
        }
        let student = vp_times(alpha_bars, Spacing::Trailing, steps, last);
        let teacher = vp_times(alpha_bars, Spacing::Trailing, 2 * steps, last);
        debug_assert!(student.iter().enumerate().all(|(k, t)| teacher[2 * k] == *t));
        Ok(DistillGrid { student, teacher })
    }

    /// The student's steps.
    pub fn steps(&self) -> usize {
        self.student.len()
    }

    /// Student step `k`'s start t, the teacher's midpoint t' and the end t'' (None: the data).
    fn step(&self, k: usize) -> (f64, f64, Option<f64>) {
        (
            self.student[k],
            self.teacher[2 * k + 1],
            self.student.get(k + 1).copied(),
        )
    }
}

/// One column of per-example values, shaped [B, 1, 1, ...] to broadcast over `like`.
fn column(like: &Tensor, values: impl Iterator<Item = f64>) -> Result<Tensor> {
    let mut shape = vec![1; like.rank()];
    shape[0] = like.shape()[0];
    let values: Vec<f32> = values.map(|v| v as f32).collect();
    Tensor::from_slice(like.gpu(), &shape, &values, like.dtype())
}

/// alpha and std of each example's time as columns (a None time is the data: 1 and 0).
fn levels(marginals: &Marginals, like: &Tensor, times: &[Option<f64>]) -> Result<(Tensor, Tensor)> {
    let level = |t: &Option<f64>| {
        t.map_or((1.0, 0.0), |t| {
            let l = marginals.level(t as f32);
            (l.alpha, l.std)
        })
    };
    let alpha = column(like, times.iter().map(|t| level(t).0))?;
    let std = column(like, times.iter().map(|t| level(t).1))?;
    Ok((alpha, std))
}

/// The clean data a raw output predicts at x = alpha x0 + std eps, per example.
fn predicted_x0(output: Output, raw: &Tensor, x: &Tensor, alpha: &Tensor, std: &Tensor) -> Result<Tensor> {
    match output {
        Output::Eps => x.sub(&raw.mul(std)?)?.div(alpha),
        Output::X0 => Ok(raw.clone()),
        Output::V => x.mul(alpha)?.sub(&raw.mul(std)?),
        Output::Score => Err(Error::Diffusion(
            "distillation needs a VP network (eps, x0 or v), not a score network".into(),
        )),
    }
}

/// The raw output that predicts `x0` at x = alpha x0 + std eps (std > 0), per example.
fn raw_target(output: Output, x0: &Tensor, x: &Tensor, alpha: &Tensor, std: &Tensor) -> Result<Tensor> {
    let eps = || x.sub(&x0.mul(alpha)?)?.div(std);
    match output {
        Output::Eps => eps(),
        Output::X0 => Ok(x0.clone()),
        Output::V => eps()?.mul(alpha)?.sub(&x0.mul(std)?),
        Output::Score => Err(Error::Diffusion(
            "distillation needs a VP network (eps, x0 or v), not a score network".into(),
        )),
    }
}

/// A network under distillation: the closure and what its raw output is.
pub struct Role<'a> {
    pub net: &'a Network<'a>,
    pub marginals: &'a Marginals,
}

/// The student's loss for the clean batch `x0` [B, ...] at student steps `picks` (one per
/// example, each < `grid.steps()`): x_t = alpha x0 + std z at the step's start t; the teacher's
/// two deterministic DDIM steps t -> t' -> t'' (run without gradients, each prediction of the
/// data clamped to [-1, 1] as the samplers clamp it) give x_t''; the target is
/// the x0 from which one DDIM step t -> t'' lands on that x_t'' exactly,
/// x~ = (x_t'' - (std''/std) x_t) / (alpha'' - (std''/std) alpha) (at the last step, t'' the
/// data, x~ = the teacher's second prediction); the loss is the mean squared error of the
/// student's raw output against the raw output that predicts x~ (for a v student, the paper's
/// x0 error weighted by 1 + SNR). Returns the scalar loss and the targets x~.
pub fn distill_loss(
    teacher: Role,
    student: Role,
    grid: &DistillGrid,
    x0: &Tensor,
    picks: &[usize],
    noise: &mut Rng,
) -> Result<(Tensor, Tensor)> {
    let batch = x0.shape().first().copied().unwrap_or(0);
    if picks.len() != batch || picks.iter().any(|&k| k >= grid.steps()) {
        return Err(Error::shape(
            "distillation loss",
            format!(
                "{} student steps picked for a batch of {batch} (each below {})",
                picks.len(),
                grid.steps()
            ),
        ));
    }
    let steps: Vec<_> = picks.iter().map(|&k| grid.step(k)).collect();
    let start: Vec<_> = steps.iter().map(|s| Some(s.0)).collect();
    let mid: Vec<_> = steps.iter().map(|s| Some(s.1)).collect();
    let end: Vec<_> = steps.iter().map(|s| s.2).collect();
    let times = |t: &[Option<f64>]| -> Vec<f32> { t.iter().map(|t| t.unwrap_or(0.0) as f32).collect() };
    let (a, s) = levels(teacher.marginals, x0, &start)?;
    let (a1, s1) = levels(teacher.marginals, x0, &mid)?;
    let (a2, s2) = levels(teacher.marginals, x0, &end)?;
    let z = noise.normal(x0.gpu(), x0.shape(), 0.0, 1.0, x0.dtype())?;
    let x_t = x0.mul(&a)?.add(&z.mul(&s)?)?;
    let target = {
        let _teacher_runs_without_gradients = crate::no_grad();
        // one DDIM step: x_to = alpha_to x^ + std_to (x - alpha x^) / std
        let ddim =
            |x: &Tensor, x_hat: &Tensor, (a, s): (&Tensor, &Tensor), (a_to, s_to): (&Tensor, &Tensor)| {
                let eps = x.sub(&x_hat.mul(a)?)?.div(s)?;
                x_hat.mul(a_to)?.add(&eps.mul(s_to)?)
            };
        // (the predictions clamped to the data's range, as the samplers clamp them)
        let predict = |x: &Tensor, t: &[Option<f64>], a: &Tensor, s: &Tensor| {
            let raw = (teacher.net)(x, &times(t))?;
            predicted_x0(teacher.marginals.output(), &raw, x, a, s)?.clamp(-DATA_RANGE, DATA_RANGE)
        };
        let x_hat = predict(&x_t, &start, &a, &s)?;
        let x_mid = ddim(&x_t, &x_hat, (&a, &s), (&a1, &s1))?;
        let x_hat_mid = predict(&x_mid, &mid, &a1, &s1)?;
        let x_end = ddim(&x_mid, &x_hat_mid, (&a1, &s1), (&a2, &s2))?;
        let ratio = s2.div(&s)?;
        x_end.sub(&x_t.mul(&ratio)?)?.div(&a2.sub(&a.mul(&ratio)?)?)?
    };
    let (sa, ss) = levels(student.marginals, x0, &start)?;
    let raw = (student.net)(&x_t, &times(&start))?;
    if raw.shape() != x0.shape() {
        return Err(Error::shape(
            "distillation loss",
            format!(
                "student output {:?} differs from the batch {:?}",
                raw.shape(),
                x0.shape()
            ),
        ));
    }
    let want = raw_target(student.marginals.output(), &target, &x_t, &sa, &ss)?;
    let loss = raw.sub(&want)?.square()?.mean_all()?;
    Ok((loss, target))
}
