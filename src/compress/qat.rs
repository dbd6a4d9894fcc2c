//! Quantisation-aware fine-tuning: each training step runs forward and backward on the conv and
//! linear weights rounded as `wgdiff compress --quantize BITS --per-channel` will store them.
//!
//! The float weights are kept aside and put back before the optimiser step, which applies the
//! gradient taken at the rounded weights to them (the straight-through estimator). The rounding
//! is the CPU's [`quantize`] itself, so what trains is exactly what `compress` writes; the
//! weights are read back together (one device round trip a step) and uploaded rounded, a small
//! share of a step at this lab's model sizes.

use crate::checkpoint::compressed::{quantize, WeightBits};
use crate::models::summary::WeightInfo;
use crate::{Error, Result, Tensor};

/// The parameters a quantisation-aware run rounds: index among the trainer's parameters and
/// output-channel axis, for `bits`.
pub struct QatWeights {
    bits: WeightBits,
    weights: Vec<(usize, usize)>,
}

/// The float weights a [`QatWeights::round`] replaced, to put back with [`QatWeights::restore`].
pub struct FloatWeights(Vec<Tensor>);

impl QatWeights {
    /// The conv and linear weights among `params` (`weights`: the model's layer walk), which
    /// `compress` quantises.
    pub fn new(bits: WeightBits, weights: &[WeightInfo], params: &[(String, Tensor)]) -> Result<QatWeights> {
        let weights = weights
            .iter()
            .map(|w| {
                params
                    .iter()
                    .position(|(name, _)| *name == w.name)
                    .map(|index| (index, w.role.out_axis()))
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "quantisation-aware training: the model's weight {} is not among its parameters",
                            w.name
                        ))
                    })
            })
            .collect::<Result<_>>()?;
        Ok(QatWeights { bits, weights })
    }

    /// How many weights are rounded.
    pub fn count(&self) -> usize {
        self.weights.len()
    }

    /// Replaces the weights among `params` by their rounded values (a scale per output
    /// channel); returns the float weights.
    pub async fn round(&self, params: &[(String, Tensor)]) -> Result<FloatWeights> {
        let tensors: Vec<&Tensor> = self.weights.iter().map(|&(index, _)| &params[index].1).collect();
        // (the copies are recorded before the rounded values are written, so they hold the floats)
        let floats = tensors
            .iter()
            .map(|t| t.duplicate())
            .collect::<Result<Vec<_>>>()?;
        // every weight in one readback: a device round trip per step, not one per weight
        let values = Tensor::to_vecs_async(&tensors).await?;
        for ((t, values), &(_, axis)) in tensors.iter().zip(values).zip(&self.weights) {
            let rounded = quantize(&values, t.shape(), Some(axis), self.bits).dequantize(t.shape());
            t.gpu().write(t.buffer(), bytemuck::cast_slice(&rounded));
        }
        Ok(FloatWeights(floats))
    }

    /// Puts the float weights back into `params` (after the backward pass, before the step).
    pub fn restore(&self, params: &[(String, Tensor)], floats: FloatWeights) -> Result<()> {
        for (&(index, _), float) in self.weights.iter().zip(floats.0) {
            params[index].1.copy_from(&float)?;
        }
        Ok(())
    }
}
