//! Training losses: the DDPM loss for eps / x0 / v targets (optionally min-SNR-gamma weighted),
//! denoising score matching for VE, and NCSN v1's loss; the network is a closure.

use super::process::{Marginals, Output, Process};
use crate::ops::random::Rng;
use crate::{Error, Result, Tensor};
use serde::{Deserialize, Serialize};

/// The network under training: (x_t [B, ...], B network time inputs) -> output [B, ...].
pub type Network<'a> = dyn Fn(&Tensor, &[f32]) -> Result<Tensor> + 'a;

/// Per-example weights of the VP loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Weighting {
    /// Every timestep alike (Ho et al.'s "simple" loss).
    #[default]
    Uniform,
    /// Min-SNR-gamma (Hang et al. 2023): the x0 loss weighted by min(SNR, gamma), i.e.
    /// min(SNR, gamma)/SNR on eps, min(SNR, gamma) on x0, min(SNR, gamma)/(SNR + 1) on v,
    /// with SNR = alpha-bar / (1 - alpha-bar). gamma = 5 in the paper.
    MinSnr { gamma: f32 },
}

impl Process {
    /// The training loss at network times drawn uniformly over the whole process (from the
    /// CPU `times` RNG, so runs are reproducible); noise comes from the GPU `noise` RNG.
    pub fn loss(
        &self,
        net: &Network,
        x0: &Tensor,
        weighting: Weighting,
        times: &mut impl rand::Rng,
        noise: &mut Rng,
    ) -> Result<Tensor> {
        let t = self.sample_times(times, batch_of(x0)?, 0.0..1.0)?;
        self.loss_at(net, x0, &t, weighting, noise)
    }

    /// The training loss at the caller's network time inputs `t` (one per example of the
    /// clean batch `x0` [B, ...]); a scalar tensor tracked through the network output.
    ///
    /// - VP: mean over all elements of w (output - target)², target eps, x0 or
    ///   v = alpha eps - std x0 as the objective says; w from `weighting`.
    /// - VE (denoising score matching, as the score-SDE tutorial): mean over the batch of the
    ///   sum over each example's elements of |score std + z|².
    /// - NCSN v1: the same with lambda(sigma) = sigma² and the paper's factor 1/2:
    ///   mean over the batch of ½ sum |score sigma + z|².
    pub fn loss_at(
        &self,
        net: &Network,
        x0: &Tensor,
        t: &[f32],
        weighting: Weighting,
        noise: &mut Rng,
    ) -> Result<Tensor> {
        let batch = batch_of(x0)?;
        if t.len() != batch {
            return Err(Error::shape(
                "diffusion loss",
                format!(
                    "{} time inputs for a batch of {batch} ({:?})",
                    t.len(),
                    x0.shape()
                ),
            ));
        }
        let marginals = self.marginals()?;
        let levels: Vec<_> = t.iter().map(|&ti| marginals.level(ti)).collect();
        let column = |values: Vec<f64>| -> Result<Tensor> {
            let mut shape = vec![1; x0.rank()];
            shape[0] = batch;
            let values: Vec<f32> = values.into_iter().map(|v| v as f32).collect();
            Tensor::from_slice(x0.gpu(), &shape, &values, x0.dtype())
        };
        let alpha = column(levels.iter().map(|l| l.alpha).collect())?;
        let std = column(levels.iter().map(|l| l.std).collect())?;
        let z = noise.normal(x0.gpu(), x0.shape(), 0.0, 1.0, x0.dtype())?;
        let x_t = x0.mul(&alpha)?.add(&z.mul(&std)?)?;
        let out = net(&x_t, t)?;
        if out.shape() != x0.shape() {
            return Err(Error::shape(
                "diffusion loss",
                format!(
                    "network output {:?} differs from the batch {:?}",
                    out.shape(),
                    x0.shape()
                ),
            ));
        }
        let output = marginals.output();
        if output == Output::Score {
            if weighting != Weighting::Uniform {
                return Err(Error::Diffusion(format!(
                    "{weighting:?} weighting applies to VP processes, not {}",
                    self.name()
                )));
            }
            let half = if matches!(self, Process::Ncsn { .. }) {
                0.5
            } else {
                1.0
            };
            let per_example = (x0.numel() / batch) as f32;
            return out
                .mul(&std)?
                .add(&z)?
                .square()?
                .mean_all()?
                .mul_scalar(half * per_example);
        }
        let target = match output {
            Output::Eps => z,
            Output::X0 => x0.clone(),
            _ => z.mul(&alpha)?.sub(&x0.mul(&std)?)?,
        };
        let squared = out.sub(&target)?.square()?;
        match weighting {
            Weighting::Uniform => squared.mean_all(),
            Weighting::MinSnr { gamma } => {
                if gamma.is_nan() || gamma <= 0.0 {
                    return Err(Error::Diffusion(format!(
                        "min-SNR weighting needs gamma > 0, got {gamma}"
                    )));
                }
                let weights = levels
                    .iter()
                    .map(|l| min_snr_weight(&marginals, l.alpha, l.std, gamma))
                    .collect();
                squared.mul(&column(weights)?)?.mean_all()
            }
        }
    }
}

/// min(SNR, gamma) expressed on the network's target.
fn min_snr_weight(marginals: &Marginals, alpha: f64, std: f64, gamma: f32) -> f64 {
    let snr = (alpha * alpha) / (std * std).max(1e-20);
    let clipped = snr.min(gamma as f64);
    match marginals.output() {
        Output::Eps => clipped / snr,
        Output::X0 => clipped,
        Output::V | Output::Score => clipped / (snr + 1.0),
    }
}

fn batch_of(x0: &Tensor) -> Result<usize> {
    match x0.shape().first() {
        Some(&b) if b > 0 => Ok(b),
        _ => Err(Error::shape(
            "diffusion loss",
            format!(
                "the clean batch needs shape [B, ...] with B > 0, got {:?}",
                x0.shape()
            ),
        )),
    }
}
