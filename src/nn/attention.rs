//! The U-Net's self-attention block: GroupNorm, 1x1 qkv projection, multi-head attention over
//! the spatial positions, 1x1 output projection, plus the input (residual).

use super::GroupNorm;
use crate::ops::attention::spatial_self_attention;
use crate::ops::random::Rng;
use crate::{DType, Gpu, Result, Tensor};

/// Residual multi-head self-attention over the H*W positions of [N, C, H, W].
pub struct AttentionBlock {
    pub norm: GroupNorm,
    pub qkv_weight: Tensor,
    pub qkv_bias: Tensor,
    pub out_weight: Tensor,
    pub out_bias: Tensor,
    pub heads: usize,
}

impl AttentionBlock {
    pub fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        channels: usize,
        heads: usize,
        groups: usize,
    ) -> Result<AttentionBlock> {
        let std = (1.0 / channels as f32).sqrt();
        let weight = |rng: &mut Rng, rows: usize| -> Result<Tensor> {
            Ok(rng
                .normal(gpu, &[rows, channels], 0.0, std, DType::F32)?
                .requires_grad())
        };
        Ok(AttentionBlock {
            norm: GroupNorm::new(gpu, groups, channels)?,
            qkv_weight: weight(rng, 3 * channels)?,
            qkv_bias: Tensor::zeros(gpu, &[3 * channels], DType::F32)?.requires_grad(),
            out_weight: weight(rng, channels)?,
            out_bias: Tensor::zeros(gpu, &[channels], DType::F32)?.requires_grad(),
            heads,
        })
    }

    /// The same block with epsilon `eps` in its norm.
    pub fn with_norm_eps(self, eps: f32) -> AttentionBlock {
        AttentionBlock {
            norm: self.norm.with_eps(eps),
            ..self
        }
    }

    /// `x` + attention over its positions, in `x`'s dtype (parameters cast at use).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.norm.forward(x)?;
        let [qkv_weight, qkv_bias, out_weight, out_bias] =
            [&self.qkv_weight, &self.qkv_bias, &self.out_weight, &self.out_bias]
                .map(|p| p.to_dtype(x.dtype()));
        let h = spatial_self_attention(&h, &qkv_weight?, &qkv_bias?, &out_weight?, &out_bias?, self.heads)?;
        x.add(&h)
    }

    pub fn params(&self) -> Vec<Tensor> {
        let mut p = self.norm.params();
        p.extend([
            self.qkv_weight.clone(),
            self.qkv_bias.clone(),
            self.out_weight.clone(),
            self.out_bias.clone(),
        ]);
        p
    }
}
