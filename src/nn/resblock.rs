//! The DDPM U-Net's residual block: GroupNorm -> SiLU -> 3x3 conv, + a linear projection of
//! the time embedding, GroupNorm -> SiLU -> (dropout) -> 3x3 conv, + the input (1x1 conv when channels change).

use super::{dropout, Conv2d, ConvGroups, GroupNorm, Linear, SpatialConv};
use crate::ops::random::Rng;
use crate::{Gpu, Result, Tensor};

/// Variations of the block: its 3x3 convolutions' groups and bottleneck, and its dropout.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ResBlockOptions {
    pub conv_groups: ConvGroups,
    /// Width divisor of the 1x1 -> 3x3 -> 1x1 factorisation of both 3x3 convs (see [`SpatialConv`]).
    pub bottleneck: Option<usize>,
    /// Drop probability between the second SiLU and the second conv (training only).
    pub dropout: f32,
}

/// A residual block with time-embedding injection.
pub struct ResBlock {
    pub norm1: GroupNorm,
    pub conv1: SpatialConv,
    pub time: Linear,
    pub norm2: GroupNorm,
    pub conv2: SpatialConv,
    pub skip: Option<Conv2d>,
    pub dropout: f32,
}

impl ResBlock {
    /// The plain DDPM block: dense 3x3 convs, no dropout.
    pub fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        cin: usize,
        cout: usize,
        temb: usize,
        groups: usize,
    ) -> Result<ResBlock> {
        ResBlock::with_options(gpu, rng, cin, cout, temb, groups, ResBlockOptions::default())
    }

    /// `groups` GroupNorm groups, `temb` time-embedding width.
    pub fn with_options(
        gpu: &Gpu,
        rng: &mut Rng,
        cin: usize,
        cout: usize,
        temb: usize,
        groups: usize,
        opts: ResBlockOptions,
    ) -> Result<ResBlock> {
        Ok(ResBlock {
            norm1: GroupNorm::new(gpu, groups, cin)?,
            conv1: SpatialConv::new(gpu, rng, cin, cout, opts.conv_groups, opts.bottleneck)?,
            time: Linear::new(gpu, rng, temb, cout)?,
            norm2: GroupNorm::new(gpu, groups, cout)?,
            conv2: SpatialConv::new(gpu, rng, cout, cout, opts.conv_groups, opts.bottleneck)?,
            skip: (cin != cout)
                .then(|| Conv2d::new(gpu, rng, cin, cout, 1, 1, 0, 1))
                .transpose()?,
            dropout: opts.dropout,
        })
    }

    /// The same block with epsilon `eps` in both norms.
    pub fn with_norm_eps(self, eps: f32) -> ResBlock {
        ResBlock {
            norm1: self.norm1.with_eps(eps),
            norm2: self.norm2.with_eps(eps),
            ..self
        }
    }

    /// `x` [N, Cin, H, W], `temb` [N, temb] -> [N, Cout, H, W], without dropout.
    pub fn forward(&self, x: &Tensor, temb: &Tensor) -> Result<Tensor> {
        self.forward_with(x, temb, None)
    }

    /// As [`ResBlock::forward`], with dropout drawn from `dropout_rng` when it is given
    /// (training mode) and the block's drop rate is positive.
    pub fn forward_with(&self, x: &Tensor, temb: &Tensor, dropout_rng: Option<&mut Rng>) -> Result<Tensor> {
        // The time embedding and the skip connection are added by the convs' epilogues.
        let t = self.time.forward(&temb.silu()?)?;
        let h = self
            .conv1
            .forward_plus(&self.norm1.forward_silu(x)?, Some(&t), None)?;
        let mut h = self.norm2.forward_silu(&h)?;
        if let Some(rng) = dropout_rng {
            h = dropout(&h, self.dropout, rng)?;
        }
        let skip = match &self.skip {
            Some(c) => c.forward(x)?,
            None => x.clone(),
        };
        self.conv2.forward_plus(&h, None, Some(&skip))
    }

    pub fn params(&self) -> Vec<Tensor> {
        let mut p = self.norm1.params();
        p.extend(self.conv1.params());
        p.extend([self.time.weight.float(), self.time.bias.clone()]);
        p.extend(self.norm2.params());
        p.extend(self.conv2.params());
        if let Some(s) = &self.skip {
            p.extend(s.params());
        }
        p
    }
}
