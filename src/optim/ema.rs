//! Exponential moving average of parameters (the weights used for sampling), updated on
//! the GPU after each optimiser step.

use crate::gpu::KernelSpec;
use crate::ops::FLAT_WG;
use crate::{shader, Result, Tensor};

/// Shadow copies of parameters: shadow = decay * shadow + (1 - decay) * param.
pub struct Ema {
    pub decay: f32,
    shadow: Vec<Tensor>,
}

impl Ema {
    /// Starts the average at the current parameter values.
    pub fn new(params: &[Tensor], decay: f32) -> Result<Ema> {
        let shadow = params
            .iter()
            .map(|p| p.detach().duplicate())
            .collect::<Result<_>>()?;
        Ok(Ema { decay, shadow })
    }

    /// Moves every shadow towards its parameter.
    pub fn update(&self, params: &[Tensor]) {
        let Some(first) = params.first() else { return };
        let gpu = first.gpu();
        let kernel = gpu.kernel(&KernelSpec {
            source: shader!("optim"),
            entry: "ema_update",
            defines: &[],
            inputs: 1,
            outputs: 1,
            texels: 0,
        });
        for (p, s) in params.iter().zip(&self.shadow) {
            let n = p.numel() as u32;
            gpu.dispatch_named(
                &kernel,
                &[n, self.decay.to_bits()],
                &[p.buffer()],
                &[s.buffer()],
                gpu.grid(n.div_ceil(4 * FLAT_WG)),
                crate::gpu::Cost::memory("ema", p.byte_len() + 2 * s.byte_len()),
            );
        }
    }

    /// The averaged parameters, in the order given to [`Ema::new`].
    pub fn shadow(&self) -> &[Tensor] {
        &self.shadow
    }
}
