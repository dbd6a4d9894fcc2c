//! `ConvNextNet`: a small DDPM denoiser of ConvNeXt blocks at two resolutions (the model of the
//! "CUDA optimisations" study at MNIST size) whose convolution and block kernels are chosen per call.
//!
//! Layout (`ConvNextNetConfig::mnist()`: 28x28x1 images, widths C0 = 32 and C1 = 64, 149,185
//! parameters):
//! - time: sinusoid(t) -> `time.0` Linear -> SiLU -> `time.1` Linear = e;
//! - `stem` 3x3 conv 1 -> C0, then stage `down` at C0 (its output is the skip);
//! - `downsample` 3x3 stride-2 conv C0 -> C1, stages `mid.0` and `mid.1` at half resolution;
//! - nearest 2x upsample, `upsample` 3x3 conv C1 -> C0, + the skip, stage `up` at C0;
//! - `out` 3x3 conv C0 -> 1.
//!
//! A stage adds a per-channel Linear of SiLU(e) to its input and runs one ConvNeXt block
//! (depthwise 7x7 conv, channel LayerNorm, 1x1 conv to 4C, GELU, 1x1 conv back, residual).

use super::embedding::{timestep_embedding, TimeSinusoid};
use crate::nn::{Conv2d, Linear};
use crate::ops::blocks::{convnext_block, ConvNextImpl, ConvNextParams};
use crate::ops::conv::use_conv_impl;
use crate::ops::random::Rng;
use crate::ops::ConvImpl;
use crate::{DType, Error, Gpu, Result, Tensor};
use serde::Serialize;

/// Sizes of a [`ConvNextNet`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConvNextNetConfig {
    /// Square image side (even: the net works at full and half resolution).
    pub image_size: usize,
    pub in_channels: usize,
    /// Channels at full resolution (C0) and at half resolution (C1); multiples of 4 up to 128
    /// so the fused block kernels take them.
    pub widths: [usize; 2],
    /// Sinusoidal time features (even, at least 4) and the time embedding's width.
    pub time_sinusoid_dim: usize,
    pub time_embed_dim: usize,
}

impl ConvNextNetConfig {
    /// The MNIST model of the speed ladder (see the module doc).
    pub fn mnist() -> ConvNextNetConfig {
        ConvNextNetConfig {
            image_size: 28,
            in_channels: 1,
            widths: [32, 64],
            time_sinusoid_dim: 32,
            time_embed_dim: 64,
        }
    }

    /// Trainable values of the net this config builds (see the module doc's layout).
    pub fn parameter_count(&self) -> usize {
        let [c0, c1] = self.widths;
        let (cin, temb) = (self.in_channels, self.time_embed_dim);
        let time = self.time_sinusoid_dim * temb + temb + temb * temb + temb;
        // the time projection, then the block: depthwise 7x7 + bias, gamma, beta, 1x1 C -> 4C
        // + bias, 1x1 4C -> C + bias
        let stage = |c: usize| temb * c + c + 8 * c * c + 57 * c;
        let conv3 = |cin: usize, cout: usize| 9 * cin * cout + cout;
        time + conv3(cin, c0) + 2 * stage(c0) + conv3(c0, c1) + 2 * stage(c1) + conv3(c1, c0) + conv3(c0, cin)
    }

    /// Errors naming the first setting that cannot be built.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("ConvNeXt net config: {msg}")));
        if self.image_size < 2 || self.image_size % 2 != 0 || self.in_channels == 0 {
            return bad(format!(
                "image_size {} must be even and in_channels {} at least 1",
                self.image_size, self.in_channels
            ));
        }
        if let Some(w) = self.widths.iter().find(|&&w| w == 0 || w % 4 != 0 || w > 128) {
            return bad(format!(
                "width {w}: widths must be multiples of 4 up to 128 (the fused block's limit)"
            ));
        }
        if self.time_sinusoid_dim < 4 || self.time_sinusoid_dim % 2 != 0 || self.time_embed_dim == 0 {
            return bad("time_sinusoid_dim must be even and at least 4, time_embed_dim positive".into());
        }
        Ok(())
    }
}

/// The kernels a forward (and the backward recorded with it) runs: one rung of the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvNextKernels {
    /// Every convolution's implementation (`Auto`: measured per shape).
    pub conv: ConvImpl,
    pub block: ConvNextImpl,
}

/// A time projection and the ConvNeXt block after it.
struct Stage {
    time: Linear,
    block: ConvNextParams,
}

impl Stage {
    /// Trainable block weights: fan-in scaled normals, zero biases, LayerNorm gamma 1 and beta 0.
    fn new(gpu: &Gpu, rng: &mut Rng, channels: usize, temb: usize) -> Result<Stage> {
        let c = channels;
        let mut normal = |shape: &[usize], fan_in: usize| {
            rng.normal(gpu, shape, 0.0, (1.0 / fan_in as f32).sqrt(), DType::F32)
                .map(Tensor::requires_grad)
        };
        let (dw_weight, w1, w2) = (
            normal(&[c, 1, 7, 7], 49)?,
            normal(&[4 * c, c, 1, 1], c)?,
            normal(&[c, 4 * c, 1, 1], 4 * c)?,
        );
        let time = Linear::new(gpu, rng, temb, c)?;
        let filled = |n: usize, value: f32| Ok(Tensor::full(gpu, &[n], value, DType::F32)?.requires_grad());
        Ok(Stage {
            time,
            block: ConvNextParams {
                dw_weight,
                dw_bias: filled(c, 0.0)?,
                gamma: filled(c, 1.0)?,
                beta: filled(c, 0.0)?,
                w1,
                b1: filled(4 * c, 0.0)?,
                w2,
                b2: filled(c, 0.0)?,
                eps: 1e-6,
            },
        })
    }

    /// block(x + time(SiLU(e)) per channel).
    fn forward(&self, x: &Tensor, silu_e: &Tensor, block: ConvNextImpl) -> Result<Tensor> {
        let t = self.time.forward(silu_e)?;
        let shift = t.reshape(&[t.shape()[0], t.shape()[1], 1, 1])?;
        convnext_block(&x.add(&shift)?, &self.block, block)
    }

    fn params(&self) -> Vec<Tensor> {
        let mut p = vec![self.time.weight.float(), self.time.bias.clone()];
        p.extend(self.block.tensors().into_iter().cloned());
        p
    }
}

/// The ConvNeXt denoiser (see the module doc).
pub struct ConvNextNet {
    config: ConvNextNetConfig,
    time: [Linear; 2],
    stem: Conv2d,
    down: Stage,
    downsample: Conv2d,
    mid: [Stage; 2],
    upsample: Conv2d,
    up: Stage,
    out: Conv2d,
}

impl ConvNextNet {
    /// Builds the network with weights drawn from `seed`.
    pub fn new(gpu: &Gpu, config: &ConvNextNetConfig, seed: u64) -> Result<ConvNextNet> {
        config.validate()?;
        let rng = &mut Rng::new(seed);
        let [c0, c1] = config.widths;
        let temb = config.time_embed_dim;
        Ok(ConvNextNet {
            time: [
                Linear::new(gpu, rng, config.time_sinusoid_dim, temb)?,
                Linear::new(gpu, rng, temb, temb)?,
            ],
            stem: Conv2d::new(gpu, rng, config.in_channels, c0, 3, 1, 1, 1)?,
            down: Stage::new(gpu, rng, c0, temb)?,
            downsample: Conv2d::new(gpu, rng, c0, c1, 3, 2, 1, 1)?,
            mid: [Stage::new(gpu, rng, c1, temb)?, Stage::new(gpu, rng, c1, temb)?],
            upsample: Conv2d::new(gpu, rng, c1, c0, 3, 1, 1, 1)?,
            up: Stage::new(gpu, rng, c0, temb)?,
            out: Conv2d::new(gpu, rng, c0, config.in_channels, 3, 1, 1, 1)?,
            config: config.clone(),
        })
    }

    pub fn config(&self) -> &ConvNextNetConfig {
        &self.config
    }

    /// The predicted noise for `x` [N, C, S, S] (f32) at DDPM timesteps `t` (N values), with
    /// every convolution and block run by `kernels`.
    pub fn forward(&self, x: &Tensor, t: &[f32], kernels: ConvNextKernels) -> Result<Tensor> {
        let c = &self.config;
        let want = [t.len(), c.in_channels, c.image_size, c.image_size];
        if x.shape() != want {
            return Err(Error::shape(
                "ConvNextNet",
                format!("input {:?} should be {want:?} (one time per image)", x.shape()),
            ));
        }
        let _conv = use_conv_impl(kernels.conv);
        let dim = c.time_sinusoid_dim;
        let sinusoid = Tensor::from_slice(
            x.gpu(),
            &[t.len(), dim],
            &timestep_embedding(t, dim, TimeSinusoid::default()),
            DType::F32,
        )?;
        let [first, second] = &self.time;
        let silu_e = second.forward(&first.forward(&sinusoid)?.silu()?)?.silu()?;
        let skip = self
            .down
            .forward(&self.stem.forward(x)?, &silu_e, kernels.block)?;
        let mut h = self.downsample.forward(&skip)?;
        for stage in &self.mid {
            h = stage.forward(&h, &silu_e, kernels.block)?;
        }
        let h = self.upsample.forward(&h.upsample_nearest(2, 2)?)?.add(&skip)?;
        self.out.forward(&self.up.forward(&h, &silu_e, kernels.block)?)
    }

    /// Every trainable tensor.
    pub fn params(&self) -> Vec<Tensor> {
        let mut p: Vec<Tensor> = self
            .time
            .iter()
            .flat_map(|l| [l.weight.float(), l.bias.clone()])
            .collect();
        p.extend(self.stem.params());
        p.extend(self.down.params());
        p.extend(self.downsample.params());
        p.extend(self.mid.iter().flat_map(Stage::params));
        p.extend(self.upsample.params());
        p.extend(self.up.params());
        p.extend(self.out.params());
        p
    }
}
