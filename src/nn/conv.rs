//! `Conv2d` (weight [Cout, Cin/groups, K, K] ~ N(0, 1/fan_in), zero bias), `ConvTranspose2d`
//! and `GroupNorm` (gamma 1, beta 0) layers: parameters plus a forward that calls the tensor ops.

use super::Weight;
use crate::ops::random::Rng;
use crate::ops::{ConvAddends, ConvImpl, ConvOptions};
use crate::{DType, Gpu, Result, Tensor};

/// A 2-D convolution layer.
pub struct Conv2d {
    pub weight: Weight,
    pub bias: Option<Tensor>,
    pub opts: ConvOptions,
    /// Implementation used by `forward` (default `auto`).
    pub imp: ConvImpl,
}

/// A trainable weight of `shape` ~ N(0, 1/fan_in) and a trainable zero bias of `channels`.
fn init_weight_and_bias(
    gpu: &Gpu,
    rng: &mut Rng,
    shape: [usize; 4],
    fan_in: usize,
    channels: usize,
) -> Result<(Tensor, Option<Tensor>)> {
    let std = (1.0 / fan_in as f32).sqrt();
    Ok((
        rng.normal(gpu, &shape, 0.0, std, DType::F32)?.requires_grad(),
        Some(Tensor::zeros(gpu, &[channels], DType::F32)?.requires_grad()),
    ))
}

/// The weight and bias in `x`'s dtype (the same tensors when it is theirs).
fn cast_params(weight: &Tensor, bias: Option<&Tensor>, x: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
    let dtype = x.dtype();
    Ok((
        weight.to_dtype(dtype)?,
        bias.map(|b| b.to_dtype(dtype)).transpose()?,
    ))
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
        let (weight, bias) =
            init_weight_and_bias(gpu, rng, [cout, cin / groups, kernel, kernel], fan_in, cout)?;
        Ok(Conv2d {
            weight: weight.into(),
            bias,
            opts: ConvOptions::default()
                .stride(stride)
                .padding(padding)
                .groups(groups),
            imp: ConvImpl::Auto,
        })
    }

    /// The same layer without its bias.
    pub fn without_bias(self) -> Conv2d {
        Conv2d { bias: None, ..self }
    }

    /// The convolution of `x` in its dtype (parameters cast at use).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_plus(x, None, None)
    }

    /// `forward(x)` + `sample_bias` ([N, Cout], e.g. a projected time embedding) + `residual`
    /// (the output's shape), added as the convolution stores its output. A weight with a
    /// packed integer form runs it when nothing needs gradients and `x` is f32.
    pub fn forward_plus(
        &self,
        x: &Tensor,
        sample_bias: Option<&Tensor>,
        residual: Option<&Tensor>,
    ) -> Result<Tensor> {
        let bias = self.bias.as_ref().map(|b| b.to_dtype(x.dtype())).transpose()?;
        let add = ConvAddends {
            bias: bias.as_ref(),
            sample_bias,
            residual,
        };
        match self.weight.packed_for(x) {
            Some(packed) => x.conv2d_packed(packed, self.opts, add),
            None => x.conv2d_plus(
                &self.weight.values()?.to_dtype(x.dtype())?,
                self.opts,
                self.imp,
                add,
            ),
        }
    }

    pub fn params(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.float())
            .chain(self.bias.clone())
            .collect()
    }
}

/// A transposed 2-D convolution layer (PyTorch's `ConvTranspose2d`): weight
/// [Cin, Cout/groups, K, K] ~ N(0, 1/(Cin/groups * K * K)), zero bias.
pub struct ConvTranspose2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub opts: ConvOptions,
    pub output_padding: usize,
}

impl ConvTranspose2d {
    /// Square `kernel`, `stride`, no padding, `output_padding` extra rows/columns at the end.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        cin: usize,
        cout: usize,
        kernel: usize,
        stride: usize,
        output_padding: usize,
        groups: usize,
    ) -> Result<ConvTranspose2d> {
        let fan_in = cin / groups * kernel * kernel;
        let (weight, bias) =
            init_weight_and_bias(gpu, rng, [cin, cout / groups, kernel, kernel], fan_in, cout)?;
        Ok(ConvTranspose2d {
            weight,
            bias,
            opts: ConvOptions::default().stride(stride).groups(groups),
            output_padding,
        })
    }

    /// The same layer without its bias.
    pub fn without_bias(self) -> ConvTranspose2d {
        ConvTranspose2d { bias: None, ..self }
    }

    /// The transposed convolution of `x` in its dtype (parameters cast at use).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let op = (self.output_padding, self.output_padding);
        let (weight, bias) = cast_params(&self.weight, self.bias.as_ref(), x)?;
        x.conv_transpose2d(&weight, bias.as_ref(), self.opts, op)
    }

    pub fn params(&self) -> Vec<Tensor> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }

    /// Output channels.
    pub fn cout(&self) -> usize {
        self.weight.shape()[1] * self.opts.groups
    }

    /// Output [N, Cout, OH, OW] for an input [N, Cin, H, W]: along each axis
    /// (H - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1 (of that axis's
    /// stride, padding, dilation and kernel size; 0 when the padding leaves nothing).
    pub fn output_shape(&self, shape: &[usize]) -> Vec<usize> {
        let (o, w) = (&self.opts, self.weight.shape());
        let size = |i: usize, k: usize, s: usize, p: usize, d: usize| {
            (i.saturating_sub(1) * s + d * (k - 1) + self.output_padding + 1).saturating_sub(2 * p)
        };
        vec![
            shape[0],
            self.cout(),
            size(shape[2], w[2], o.stride.0, o.padding.0, o.dilation.0),
            size(shape[3], w[3], o.stride.1, o.padding.1, o.dilation.1),
        ]
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

    /// The same norm with epsilon `eps` (PyTorch's 1e-5 by default).
    pub fn with_eps(self, eps: f32) -> GroupNorm {
        GroupNorm { eps, ..self }
    }

    /// The normalised `x` in its dtype (gamma and beta cast at use; statistics in f32).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (gamma, beta) = (self.gamma.to_dtype(x.dtype())?, self.beta.to_dtype(x.dtype())?);
        x.group_norm(self.groups, &gamma, &beta, self.eps)
    }

    /// `silu(forward(x))` in one kernel.
    pub fn forward_silu(&self, x: &Tensor) -> Result<Tensor> {
        let (gamma, beta) = (self.gamma.to_dtype(x.dtype())?, self.beta.to_dtype(x.dtype())?);
        x.group_norm_silu(self.groups, &gamma, &beta, self.eps)
    }

    pub fn params(&self) -> Vec<Tensor> {
        vec![self.gamma.clone(), self.beta.clone()]
    }
}
