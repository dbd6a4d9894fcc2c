//! Dynamic loss scaling for f16 training: the loss is multiplied by a scale before backward so
//! that small gradients survive f16, and a step whose gradients overflow is skipped instead.

use super::{global_grad_norm, Adam};
use crate::{Error, Result, Tensor};
use serde::{Deserialize, Serialize};

/// The loss scale and its counters (saved with a checkpoint, so a resumed run goes on exactly).
///
/// The scale starts at 2^15, doubles after [`LossScaler::GROWTH_INTERVAL`] steps in a row
/// without overflow, and halves on a step whose gradients hold an inf or NaN; that step changes
/// nothing (weights, Adam moments and step count; the caller leaves its EMA alone too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossScaler {
    /// The factor the loss is multiplied by before backward (a power of two).
    pub scale: f32,
    /// Overflow-free steps since the scale last changed.
    pub good_steps: u32,
    /// Steps skipped so far because a gradient overflowed (Adam's step count lags by these).
    pub skipped: u32,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler {
            scale: 32768.0,
            good_steps: 0,
            skipped: 0,
        }
    }
}

impl LossScaler {
    /// Overflow-free steps after which the scale doubles.
    pub const GROWTH_INTERVAL: u32 = 1000;

    /// Applies Adam to gradients of the loss times [`LossScaler::scale`] (the 1/scale folded
    /// into Adam's clipping factor) unless one of them is inf or NaN; updates the scale.
    /// Returns whether the update was applied. Reads the global gradient norm back (one sync).
    async fn step(&mut self, adam: &mut Adam) -> Result<bool> {
        let norm = global_grad_norm(adam.params())?;
        let finite = match &norm {
            Some(norm) => norm.to_vec_async().await?[0].is_finite(),
            None => true,
        };
        let scale = self.scale;
        if self.record(finite)? {
            adam.step_unscaled(scale, norm)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Updates the scale after a step whose scaled gradients were `finite` (or not) and
    /// returns whether that step's update is to be applied; the caller applies it (a
    /// data-parallel run, which checks the averaged gradients on the host, on every replica).
    pub fn record(&mut self, finite: bool) -> Result<bool> {
        if finite {
            self.good_steps += 1;
            if self.good_steps >= Self::GROWTH_INTERVAL {
                self.scale *= 2.0;
                self.good_steps = 0;
            }
            return Ok(true);
        }
        if self.scale <= 1.0 {
            return Err(Error::Training(format!(
                "gradients overflow f16 even with loss scale {}: the training diverged. Lower --lr or \
                 --max-grad-norm, or train with --precision f32",
                self.scale
            )));
        }
        self.scale /= 2.0;
        self.good_steps = 0;
        self.skipped += 1;
        Ok(false)
    }
}

/// Backward of `loss`, one Adam update, and cleared gradients; with a `scaler`, the loss is
/// scaled first and the update skipped on overflow. Returns whether the update was applied
/// (async because the overflow check reads the gradient norm back; native callers block on it).
pub async fn backward_and_step(
    loss: &Tensor,
    adam: &mut Adam,
    scaler: Option<&mut LossScaler>,
) -> Result<bool> {
    backward_scaled(loss, scaler.as_deref())?;
    update(adam, scaler).await
}

/// The first half of [`backward_and_step`]: backward of `loss`, scaled by the `scaler`'s scale.
pub fn backward_scaled(loss: &Tensor, scaler: Option<&LossScaler>) -> Result<()> {
    match scaler {
        None => crate::backward(loss),
        Some(scaler) => crate::backward(&loss.mul_scalar(scaler.scale)?),
    }
}

/// The second half of [`backward_and_step`]: the Adam update (skipped by the `scaler` on an
/// overflow) and cleared gradients; returns whether the update was applied.
pub async fn update(adam: &mut Adam, scaler: Option<&mut LossScaler>) -> Result<bool> {
    let applied = match scaler {
        None => {
            adam.step()?;
            true
        }
        Some(scaler) => scaler.step(adam).await?,
    };
    adam.zero_grad();
    Ok(applied)
}
