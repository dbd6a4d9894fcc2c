//! `Linear` (x @ W + b, normal init with std 1/sqrt(fan_in)) and `Mlp`, a stack of linear
//! layers with tanh between them.

use super::Weight;
use crate::ops::random::Rng;
use crate::ops::BiasAlong;
use crate::{DType, Gpu, Result, Tensor};

/// A fully connected layer's weight [fan_in, fan_out] and bias [fan_out].
pub struct Linear {
    pub weight: Weight,
    pub bias: Tensor,
}

impl Linear {
    /// Weight drawn from N(0, 1/fan_in) on the device, zero bias; both track gradients.
    pub fn new(gpu: &Gpu, rng: &mut Rng, fan_in: usize, fan_out: usize) -> Result<Linear> {
        let std = (1.0 / fan_in as f32).sqrt();
        Ok(Linear {
            weight: rng
                .normal(gpu, &[fan_in, fan_out], 0.0, std, DType::F32)?
                .requires_grad()
                .into(),
            bias: Tensor::zeros(gpu, &[fan_out], DType::F32)?.requires_grad(),
        })
    }

    /// `x @ weight + bias` for `x` of shape [.., fan_in], in `x`'s dtype (the f32 weights are
    /// cast at use for an f16 `x`); a packed integer form of the weight runs when nothing
    /// needs gradients and `x` is f32.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if let Some(packed) = self.weight.packed_for(x) {
            return x.matmul_packed(packed, Some(&self.bias));
        }
        let dtype = x.dtype();
        x.matmul_bias(
            &self.weight.values()?.to_dtype(dtype)?,
            &self.bias.to_dtype(dtype)?,
            BiasAlong::Columns,
        )
    }
}

/// Linear layers of the given widths with tanh after every layer but the last.
pub struct Mlp {
    pub layers: Vec<Linear>,
}

impl Mlp {
    /// `widths` = [inputs, hidden.., outputs], e.g. [2, 64, 64, 1].
    pub fn new(gpu: &Gpu, rng: &mut Rng, widths: &[usize]) -> Result<Mlp> {
        let layers = widths
            .windows(2)
            .map(|w| Linear::new(gpu, rng, w[0], w[1]))
            .collect::<Result<_>>()?;
        Ok(Mlp { layers })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(&h)?;
            if i + 1 < self.layers.len() {
                h = h.tanh()?;
            }
        }
        Ok(h)
    }

    /// Every weight and bias, layer by layer.
    pub fn params(&self) -> Vec<Tensor> {
        self.layers
            .iter()
            .flat_map(|l| [l.weight.float(), l.bias.clone()])
            .collect()
    }
}
