//! `Conv2d` (weight [Cout, Cin/groups, K, K] ~ N(0, 1/fan_in), zero bias) and `GroupNorm`
//! (gamma 1, beta 0) layers: parameters plus a forward that calls the tensor ops.

use crate::ops::random::Rng;
use crate::ops::{ConvImpl, ConvOptions};
use crate::{DType, Gpu, Result, Tensor};

/// A 2-D convolution layer.
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Tensor,
    pub opts: ConvOptions,
    /// Implementation used by `forward` (default `auto`).
    pub imp: ConvImpl,
}

impl Conv2d {
    /// Square `kernel`, `padding` and `stride`, `groups` channel groups.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        cin: usize,
        cout: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        groups: usize,
    ) -> Result<Conv2d> {
        let fan_in = cin / groups * kernel * kernel;
        let std = (1.0 / fan_in as f32).sqrt();
        Ok(Conv2d {
            weight: rng
                .normal(gpu, &[cout, cin / groups, kernel, kernel], 0.0, std, DType::F32)?
                .requires_grad(),
            bias: Tensor::zeros(gpu, &[cout], DType::F32)?.requires_grad(),
            opts: ConvOptions::new(stride, padding, 1, groups),
            imp: ConvImpl::Auto,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, Some(&self.bias), self.opts, self.imp)
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}

/// GroupNorm over `groups` channel groups with a learned per-channel scale and shift.
pub struct GroupNorm {
    pub groups: usize,
    pub gamma: Tensor,
    pub beta: Tensor,
    pub eps: f32,
}

impl GroupNorm {
    pub fn new(gpu: &Gpu, groups: usize, channels: usize) -> Result<GroupNorm> {
        Ok(GroupNorm {
            groups,
            gamma: Tensor::full(gpu, &[channels], 1.0, DType::F32)?.requires_grad(),
            beta: Tensor::zeros(gpu, &[channels], DType::F32)?.requires_grad(),
            eps: 1e-5,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.group_norm(self.groups, &self.gamma, &self.beta, self.eps)
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gamma.clone(), self.beta.clone()]
    }
}
